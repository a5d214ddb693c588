# Neural-persistence analyses (paper Sections 3-4, appendices B-D and G).
# analysis MLPs ──analysis_train (all seeds of an architecture at once)──▶ model.pt + curves.csv
#   ──analysis_models / analysis_curves──▶ models.csv, curves.csv.gz ──▶ targets 1, 2, 6, 7, 9
# regulariser MLPs ──analysis_train_regulariser (all seeds of a kind at once)──▶ target 8;   synthetic matrices: targets 3-5
# Every rule calls one `dgpbench analysis TARGET` (see dgpbench/cli/analysis.py for the
# files each writes). Configuration: the `analysis:` section of the config, read and checked
# in analysis_common.smk.


include: "analysis_common.smk"


wildcard_constraints:
    group=r"linear|(relu|tanh)-l\d+-h\d+",
    regkind=r"none|batchnorm|dropout",


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------
rule analysis_train:
    """Train every seed of one analysis MLP as one stacked model; record each seed's NP,
    variance, DGP, validation and test accuracy at every evaluation (the curves replace the
    paper's 160 kept checkpoints per run). Each seed gets the files `dgpbench analysis train`
    writes, in its own run folder."""
    input:
        data=data_file(AN_DATASETS),
    output:
        models=analysis_seed_files("model.pt"),
        metrics=analysis_seed_files("metrics.csv"),
        curves=analysis_seed_files("curves.csv"),
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: AN_DATASETS[wc.dataset],
        data=data_args(),
        arch=lambda wc: analysis_group_arch(wc.group),
        seeds=join(AN["seeds"]),
        out_dirs=lambda wc, output: join(Path(m).parent for m in output.models),
        runs=lambda wc: join(f"{wc.dataset}/{wc.group}-s{s}" for s in AN["seeds"]),
        train=lookup(within=config, dpath="analysis/training"),
    threads: AN_TRAIN_THREADS
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=lambda wc: analysis_group_mem_mb(wc.group),
        runtime=lambda wc: analysis_group_runtime(wc.dataset, wc.group),
    log:
        f"{AN_LOGS}/train/{{dataset}}/{{group}}.log",
    benchmark:
        f"{AN_BENCH}/train/{{dataset}}/{{group}}.tsv"
    shell:
        "{params.dgpbench} analysis train-seeds --dataset {params.name:q} {params.data} {params.arch}"
        " --seeds {params.seeds} --out-dirs {params.out_dirs} --runs {params.runs}"
        " --lr {params.train[lr]} --epochs {params.train[epochs]}"
        " --batch-size {params.train[batch_size]}"
        " --checkpoints-per-epoch {params.train[checkpoints_per_epoch]}"
        " --threads {threads} > {log} 2>&1"


rule analysis_train_regulariser:
    """Train every seed of one regulariser model (none, batch norm or dropout) as one stacked
    model, with per-seed batch statistics and dropout masks (no curves: the final weights)."""
    input:
        data=data_file(REG_DATASETS),
    output:
        models=regulariser_seed_files("model.pt"),
        metrics=regulariser_seed_files("metrics.csv"),
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: REG_DATASETS[wc.dataset],
        data=data_args(),
        arch=lambda wc: regulariser_arch(wc.regkind),
        seeds=join(REG["seeds"]),
        out_dirs=lambda wc, output: join(Path(m).parent for m in output.models),
        train=lookup(within=config, dpath="analysis/training"),
    threads: AN_TRAIN_THREADS
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=lambda wc: analysis_group_mem_mb(f"-h{REG['hidden']}", len(REG["seeds"])),
        runtime=lambda wc: regulariser_runtime(wc.dataset),
    log:
        f"{AN_LOGS}/train_regulariser/{{dataset}}/{{regkind}}.log",
    benchmark:
        f"{AN_BENCH}/train_regulariser/{{dataset}}/{{regkind}}.tsv"
    shell:
        "{params.dgpbench} analysis train-seeds --dataset {params.name:q} {params.data} {params.arch}"
        " --seeds {params.seeds} --out-dirs {params.out_dirs} --no-curves"
        " --lr {params.train[lr]} --epochs {params.train[epochs]}"
        " --batch-size {params.train[batch_size]}"
        " --checkpoints-per-epoch {params.train[checkpoints_per_epoch]}"
        " --threads {threads} > {log} 2>&1"


# --------------------------------------------------------------------------------------------
# shared tables
# --------------------------------------------------------------------------------------------
rule analysis_models:
    """NP, per-layer NP, variance and DGP of every final model (targets 2 and 9); NP,
    variance and DGP come from the last evaluation of each run's curves."""
    input:
        checkpoints=analysis_files("model.pt"),
        curves=analysis_files("curves.csv"),
    output:
        f"{AN_RESULTS}/models.csv",
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{AN_LOGS}/models.log",
    benchmark:
        f"{AN_BENCH}/models.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} analysis models --checkpoints {input.checkpoints} --curves {input.curves}"
        " --threads {threads} --out {output} > {log} 2>&1"


rule analysis_curves:
    """The training curves of every run in one table (targets 7 and 9)."""
    input:
        analysis_files("curves.csv"),
    output:
        f"{AN_RESULTS}/curves.csv.gz",
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{AN_LOGS}/curves.log",
    benchmark:
        f"{AN_BENCH}/curves.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} analysis curves {input} --out {output} > {log} 2>&1"


# --------------------------------------------------------------------------------------------
# targets 1-9
# --------------------------------------------------------------------------------------------
rule analysis_permutation:
    """1: NP of trained vs. randomly permuted weights, KS tests per architecture and layer."""
    input:
        analysis_files("model.pt"),
    output:
        perm=f"{AN_RESULTS}/permutation/permutation.csv.gz",
        ks=f"{AN_RESULTS}/permutation/ks_tests.csv",
        summary=table(f"{AN_RESULTS}/permutation/table_ks_rejections"),
        linear=figure(f"{AN_RESULTS}/permutation/fig_permutation_linear", AN_LINEAR),
        dnn=figure(f"{AN_RESULTS}/permutation/fig_permutation_dnn", AN_DEEP),
    params:
        dgpbench=DGPBENCH,
        p=lookup(within=config, dpath="analysis/permutation"),
    threads: 2  # the batched MST kernel runs on numba threads
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=240,
    log:
        f"{AN_LOGS}/permutation.log",
    benchmark:
        f"{AN_BENCH}/permutation.tsv"
    shell:
        "{params.dgpbench} analysis permutation --checkpoints {input}"
        " --n-permutations {params.p[n_permutations]} --seed {params.p[seed]}"
        " --sample {params.p[sample]} --alpha {params.p[alpha]} --threads {threads}"
        " --out-dir $(dirname {output.ks}) > {log} 2>&1"


rule analysis_np_variance:
    """2: NP vs. log-variance of the weights: R² table and figures; the R² of every
    evaluation of training (R² by epoch) from the curves."""
    input:
        models=rules.analysis_models.output,
        curves=rules.analysis_curves.output if AN_DEEP else [],
    output:
        r2=[f"{AN_RESULTS}/np_variance/r2.csv"] if AN_DEEP else [],
        table=table(f"{AN_RESULTS}/np_variance/table_r2", tex=True) if AN_DEEP else [],
        r2_by_epoch=[f"{AN_RESULTS}/np_variance/r2_by_epoch.csv"] if AN_DEEP else [],
        table_by_epoch=table(f"{AN_RESULTS}/np_variance/table_r2_by_epoch") if AN_DEEP else [],
        fig_by_epoch=figure(f"{AN_RESULTS}/np_variance/fig_r2_by_epoch", AN_DEEP),
        linear_table=table(f"{AN_RESULTS}/np_variance/table_r2_linear") if AN_LINEAR else [],
        linear=figure(f"{AN_RESULTS}/np_variance/fig_np_vs_log_variance_linear", AN_LINEAR),
        dnn=figure(f"{AN_RESULTS}/np_variance/fig_np_vs_log_variance_dnn", AN_DEEP),
        per_activation=[
            f
            for a in AN["activations"]
            for f in figure(f"{AN_RESULTS}/np_variance/fig_np_vs_log_variance_{a}", AN_DEEP)
        ],
    params:
        dgpbench=DGPBENCH,
        layers=join(AN["np_variance"]["figure_layers"]),
        hidden=join(AN["np_variance"]["figure_hidden"]),
        curves=lambda wc, input: f"--curves {input.curves}" if AN_DEEP else "",
        out=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{AN_LOGS}/np_variance.log",
    benchmark:
        f"{AN_BENCH}/np_variance.tsv"
    shell:
        "{params.dgpbench} analysis np-variance --models {input.models} {params.curves}"
        " --figure-layers {params.layers}"
        " --figure-hidden {params.hidden} --threads {threads} --out-dir {params.out}"
        " > {log} 2>&1"


rule analysis_bounds:
    """3: tightness of the NP bounds on synthetic matrices (App. B.1)."""
    output:
        study=f"{AN_RESULTS}/bounds/study.csv",
        table=table(f"{AN_RESULTS}/bounds/table_bounds", tex=True),
        figure=figure(f"{AN_RESULTS}/bounds/fig_bounds_tightness"),
    params:
        dgpbench=DGPBENCH,
        b=lookup(within=config, dpath="analysis/bounds"),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{AN_LOGS}/bounds.log",
    benchmark:
        f"{AN_BENCH}/bounds.tsv"
    shell:
        "{params.dgpbench} analysis bounds --n-matrices {params.b[n_matrices]}"
        " --size-range {params.b[size_range][0]} {params.b[size_range][1]}"
        " --seed {params.b[seed]} --threads {threads} --out-dir $(dirname {output.study})"
        " > {log} 2>&1"


rule analysis_np_factors:
    """4: NP vs. variance and sortedness of synthetic matrices (App. B.2)."""
    output:
        study=f"{AN_RESULTS}/np_factors/study.csv",
        table=table(f"{AN_RESULTS}/np_factors/table_r2"),
        figure=figure(f"{AN_RESULTS}/np_factors/fig_np_factors"),
    params:
        dgpbench=DGPBENCH,
        sizes=join(AN["np_factors"]["sizes"]),
        f=lookup(within=config, dpath="analysis/np_factors"),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{AN_LOGS}/np_factors.log",
    benchmark:
        f"{AN_BENCH}/np_factors.tsv"
    shell:
        "{params.dgpbench} analysis np-factors --sizes {params.sizes} --n-per-size {params.f[n_per_size]}"
        " --seed {params.f[seed]} --threads {threads} --out-dir $(dirname {output.study})"
        " > {log} 2>&1"


rule analysis_size:
    """5: expected normalised NP over matrix sizes, one heatmap per distribution (App. C)."""
    output:
        grid=f"{AN_RESULTS}/size/grid.csv",
        figure=figure(f"{AN_RESULTS}/size/fig_size_heatmaps"),
    params:
        dgpbench=DGPBENCH,
        distributions=join(AN["size"]["distributions"]),
        sizes=join(AN["size"]["sizes"]),
        s=lookup(within=config, dpath="analysis/size"),
    threads: 2  # the batched MST kernel runs on numba threads
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{AN_LOGS}/size.log",
    benchmark:
        f"{AN_BENCH}/size.tsv"
    shell:
        "{params.dgpbench} analysis size --distributions {params.distributions} --sizes {params.sizes}"
        " --n-samples {params.s[n_samples]} --seed {params.s[seed]} --threads {threads}"
        " --out-dir $(dirname {output.grid}) > {log} 2>&1"


rule analysis_weights:
    """6: maximum-likelihood fits of four families to every trained layer; win rates."""
    input:
        analysis_files("model.pt"),
    output:
        fits=f"{AN_RESULTS}/weight_distributions/fits.csv",
        table=table(f"{AN_RESULTS}/weight_distributions/table_win_rates"),
        win_rates=figure(f"{AN_RESULTS}/weight_distributions/fig_win_rates"),
        pareto=figure(f"{AN_RESULTS}/weight_distributions/fig_pareto_b"),
        normal=figure(f"{AN_RESULTS}/weight_distributions/fig_normal_sigma"),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{AN_LOGS}/weight_distributions.log",
    benchmark:
        f"{AN_BENCH}/weight_distributions.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} analysis weights --checkpoints {input} --threads {threads}"
        " --out-dir $(dirname {output.fits}) > {log} 2>&1"


rule analysis_early_stopping:
    """7: early stopping on NP, variance, DGP and validation accuracy (App. G.2)."""
    input:
        rules.analysis_curves.output,
    output:
        grid=f"{AN_RESULTS}/early_stopping/grid.csv.gz",
        np_table=table(f"{AN_RESULTS}/early_stopping/table_np", tex=True),
        dgp_table=table(f"{AN_RESULTS}/early_stopping/table_dgp", tex=True),
        figure=figure(f"{AN_RESULTS}/early_stopping/fig_heatmaps"),
    params:
        dgpbench=DGPBENCH,
        e=lookup(within=config, dpath="analysis/early_stopping"),
        where=" ".join(
            f"--heatmap-where {shlex.quote(f'{k}={v}')}"
            for k, values in AN["early_stopping"]["heatmap"].items()
            for v in values
        ),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    log:
        f"{AN_LOGS}/early_stopping.log",
    benchmark:
        f"{AN_BENCH}/early_stopping.tsv"
    shell:
        "{params.dgpbench} analysis early-stopping --curves {input} --max-burn-in {params.e[max_burn_in]}"
        " --max-patience {params.e[max_patience]} {params.where} --threads {threads}"
        " --out-dir $(dirname {output.grid}) > {log} 2>&1"


rule analysis_regularisers:
    """8: NP and variance of models trained without regulariser, with batch norm or dropout."""
    input:
        [
            f"{AN_RESULTS}/regularisers/models/{d}/{r}/model.pt"
            for d in REG_DATASETS
            for r in REG_RUNS
        ],
    output:
        models=f"{AN_RESULTS}/regularisers/models.csv",
        table=table(f"{AN_RESULTS}/regularisers/table_summary"),
        figure=figure(f"{AN_RESULTS}/regularisers/fig_regularisers"),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    log:
        f"{AN_LOGS}/regularisers.log",
    benchmark:
        f"{AN_BENCH}/regularisers.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} analysis regularisers --checkpoints {input} --threads {threads}"
        " --out-dir $(dirname {output.models}) > {log} 2>&1"


rule analysis_dgp_variance:
    """9: Kendall's tau of DGP / NP with the variance over training; DGP of final models."""
    input:
        curves=rules.analysis_curves.output,
        models=rules.analysis_models.output,
    output:
        correlations=f"{AN_RESULTS}/dgp_variance/correlations.csv",
        table=table(f"{AN_RESULTS}/dgp_variance/table_correlations"),
        training=figure(f"{AN_RESULTS}/dgp_variance/fig_training_correlations"),
        final=figure(f"{AN_RESULTS}/dgp_variance/fig_dgp_vs_log_variance", AN_DEEP),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{AN_LOGS}/dgp_variance.log",
    benchmark:
        f"{AN_BENCH}/dgp_variance.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} analysis dgp-variance --curves {input.curves} --models {input.models}"
        " --threads {threads} --out-dir $(dirname {output.correlations}) > {log} 2>&1"


rule analysis_compare:
    """Published vs reproduced: bound errors (App. B.1), R² per architecture (App. G.1) or
    the early-stopping tables (App. G.2); only the cells this run computed."""
    input:
        lambda wc: AN_COMPARE_INPUTS[wc.table],
    output:
        cells=report(
            f"{AN_RESULTS}/comparisons/comparison_{{table}}.csv",
            caption="../report/comparison_analysis.rst",
            category=COMPARISON_PAPER_SECTION,
        ),
        summary=report(
            f"{AN_RESULTS}/comparisons/comparison_{{table}}_summary.csv",
            caption="../report/comparison_analysis.rst",
            category=COMPARISON_PAPER_SECTION,
        ),
        md=f"{AN_RESULTS}/comparisons/comparison_{{table}}.md",
    wildcard_constraints:
        table="bounds|r2|early_stopping",
    params:
        dgpbench=DGPBENCH,
        out_dir=lambda wc, output: Path(output.cells).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{AN_LOGS}/compare_{{table}}.log",
    benchmark:
        f"{AN_BENCH}/compare_{{table}}.tsv"
    shell:
        "{params.dgpbench} compare-paper {wildcards.table} --input {input} --out-dir {params.out_dir}"
        " > {log} 2>&1"
