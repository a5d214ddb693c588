# Failing loudly's grid (Rabanser et al., NeurIPS 2019) with DGP, TU and MAGDiff beside its
# detectors: target `failing_loudly` (the default target with config/failing_loudly.yaml).
# pools -> shifts -> representations -> draws per method -> tables, summary, figures; every
# rule one `dgpbench fl-*` subcommand (dgpbench/cli/failing_loudly.py). Models come from the train
# rules (`models`: the CNN family and the MLPs). docs/failing-loudly.md explains the grid.


include: "failing_loudly_common.smk"


rule fl_images:
    """The fit images, the reference pool (validation images the models held out) and the
    test pool of one data set."""
    input:
        data=data_file(DATASETS),
    output:
        f"{FLR}/images/{{dataset}}/pools.npz",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        im=FL["images"],
        runs=FL["runs"],
        val_fraction=config["training"]["val_fraction"],
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/fl/images/{{dataset}}.log",
    benchmark:
        f"{BENCH}/fl/images/{{dataset}}.tsv"
    shell:
        "{params.dgpbench} fl-images --dataset {params.name:q} {params.data} --n-fit {params.im[n_fit]}"
        " --n-ref-pool {params.im[n_ref_pool]} --n-test-pool {params.im[n_test_pool]}"
        " --runs {params.runs}"
        " --val-fraction {params.val_fraction} --seed {params.im[seed]} --out {output:q}"
        " > {log:q} 2>&1"


rule fl_shift:
    """One shift class at every fraction (adversarial_shift: FGSM against the attacked model)."""
    input:
        pools=rules.fl_images.output,
        model=lambda wc: (
            [f"{RESULTS}/models/{wc.dataset}/{FL_ATTACKED}/model.pt"]
            if wc.shift == "adversarial_shift"
            else []
        ),
    output:
        f"{FLR}/shifts/{{dataset}}/{{shift}}.npz",
    params:
        dgpbench=DGPBENCH,
        fractions=join(FL["fractions"]),
        seed=FL["images"]["seed"],
        eps=lambda wc: FL["adversarial"]["max_epsilon"] or max_epsilon_for(DATASETS[wc.dataset]),
        n_eps=FL["adversarial"]["n_epsilons"],
        protocol=FL["protocol"],
        model=lambda wc, input: f"--model {shlex.quote(str(input.model))}" if input.model else "",
        big=fl_big_files,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/fl/shift/{{dataset}}/{{shift}}.log",
    benchmark:
        f"{BENCH}/fl/shift/{{dataset}}/{{shift}}.tsv"
    shell:
        "{params.big}{params.dgpbench} fl-shift --images {input.pools:q} --shift {wildcards.shift:q}"
        " --fractions {params.fractions} --seed {params.seed} {params.model}"
        " --protocol {params.protocol}"
        " --max-epsilon {params.eps} --n-epsilons {params.n_eps} --threads {threads}"
        " --out {output:q} > {log:q} 2>&1"


rule fl_features:
    """One representation (of one model, or `none`) of the reference and test pools and of
    every shifted image."""
    input:
        pools=rules.fl_images.output,
        shifts=expand(f"{FLR}/shifts/{{{{dataset}}}}/{{shift}}.npz", shift=FL["shifts"]),
        model=lambda wc: (
            [] if wc.flmodel == "none" else [f"{RESULTS}/models/{wc.dataset}/{wc.flmodel}/model.pt"]
        ),
    output:
        f"{FLR}/features/{{dataset}}/{{flmodel}}/{{representation}}.npz",
    params:
        dgpbench=DGPBENCH,
        model=lambda wc, input: shlex.quote(str(input.model)) if input.model else "none",
        batch_size=FL["features"]["batch_size"],
        device=FL["features"]["device"],
        seed=FL["seed"],
        protocol=FL["protocol"],
        big=fl_big_files,
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=fl_mem_mb(8000, 3),  # the inputs, and NoRed's float64 features: 2x the images
        runtime=120,
    log:
        f"{LOGS}/fl/features/{{dataset}}/{{flmodel}}/{{representation}}.log",
    benchmark:
        f"{BENCH}/fl/features/{{dataset}}/{{flmodel}}/{{representation}}.tsv"
    shell:
        "{params.big}{params.dgpbench} fl-features --representation {wildcards.representation} --model {params.model:q}"
        " --images {input.pools:q} --shifts {input.shifts:q} --batch-size {params.batch_size}"
        " --device {params.device} --threads {threads} --seed {params.seed}"
        " --protocol {params.protocol}"
        " --out {output:q} > {log:q} 2>&1"


rule fl_detect:
    """Every draw of one method: each shift x fraction x n, and the calibration cells."""
    input:
        lambda wc: (
            f"{FLR}/features/{wc.dataset}/{wc.flmodel}/{fl_representation(wc.flmethod)}.npz"
        ),
    output:
        f"{FLR}/records/{{dataset}}/{{flmodel}}/{{flmethod}}.csv",
    params:
        dgpbench=DGPBENCH,
        ns=lambda wc: join(fl_ns(wc.flmethod)),
        kind=lambda wc: "none" if wc.flmodel == "none" else parse_model_id(wc.flmodel).kind,
        top_n=" ".join(f"--top-n {shlex.quote(f'{s}={n}')}" for s, n in FL["top_n"].items()),
        m=fl_multivariate_ref(),
        fl={k: FL[k] for k in ("draws", "seed", "alpha", "correction", "protocol")},
        perms=FL["mmd"]["n_permutations"],
        big=fl_big_files,
    threads: 1  # the classifier too: 2 threads doubled its CPU time for no gain (docs)
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=fl_mem_mb(4000, 2),  # the features file, and the pools built from it
        runtime=120,
    log:
        f"{LOGS}/fl/detect/{{dataset}}/{{flmodel}}/{{flmethod}}.log",
    benchmark:
        f"{BENCH}/fl/detect/{{dataset}}/{{flmodel}}/{{flmethod}}.tsv"
    shell:
        "{params.big}{params.dgpbench} fl-detect --features {input:q} --method {wildcards.flmethod:q} --ns {params.ns}"
        " --draws {params.fl[draws]} --seed {params.fl[seed]} --alpha {params.fl[alpha]}"
        " --correction {params.fl[correction]} --n-permutations {params.perms}"
        " {params.m} {params.top_n} --protocol {params.fl[protocol]}"
        " --threads {threads} --tag dataset={wildcards.dataset} --tag model={wildcards.flmodel}"
        " --tag kind={params.kind} --out {output:q} > {log:q} 2>&1"


rule fl_report:
    """Tables 1a and 1b, Table 1a against Rabanser et al.'s published one, their Tables
    1b, 2a and 2b pooled over the data sets, the best rows per shift class, the
    false-positive table and the run's summary; detections and draws per cell (every table
    recomputes from them); all records in one file."""
    input:
        fl_records(),
    output:
        report(
            f"{FLR}/tables/fl_table1a_accuracy.csv",
            caption="../report/fl_table1a_accuracy.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/fl_table1a_accuracy.md",
        report(
            f"{FLR}/tables/fl_table1b.csv",
            caption="../report/fl_table1b.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/fl_table1b.md",
        report(
            f"{FLR}/tables/comparison_fl_table1a.csv",
            caption="../report/fl_comparison_table1a.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/comparison_fl_table1a_summary.csv",
        f"{FLR}/tables/comparison_fl_table1a.md",
        *(
            report(f"{FLR}/tables/fl_{t}.csv", caption="../report/fl_breakdowns.rst",
                   category=FL_SECTION)
            for t in ("table1b_pooled", "table2a_intensity", "table2b_fraction")
        ),
        *(f"{FLR}/tables/fl_{t}.md" for t in ("table1b_pooled", "table2a_intensity",
                                              "table2b_fraction")),
        report(
            f"{FLR}/tables/fl_best_per_shift.csv",
            caption="../report/fl_best_per_shift.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/fl_best_per_shift.md",
        report(
            f"{FLR}/tables/fl_false_positives.csv",
            caption="../report/fl_false_positives.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/fl_false_positives.md",
        report(
            f"{FLR}/tables/fl_ranks.csv",
            caption="../report/fl_ranks.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/tables/fl_ranks.md",
        report(
            f"{FLR}/tables/fl_summary.md",
            caption="../report/fl_summary.rst",
            category=FL_SECTION,
        ),
        cells=f"{FLR}/tables/fl_cells.csv.gz",
        records=f"{FLR}/records.csv.gz",
    params:
        dgpbench=DGPBENCH,
        alpha=FL["alpha"],
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=8000,
        runtime=30,
    log:
        f"{LOGS}/fl/report.log",
    benchmark:
        f"{BENCH}/fl/report.tsv"
    shell:
        "{params.dgpbench} fl-report {input:q} --alpha {params.alpha} --out-dir {params.out_dir:q}"
        " --aggregate {output.records:q} > {log:q} 2>&1"


rule fl_figure:
    """Detection accuracy by method and shift class, one heatmap per n, and the methods'
    critical-difference diagram (one data set)."""
    input:
        lambda wc: fl_records(wc.dataset),
    output:
        report(
            f"{FLR}/figures/fl_accuracy_vs_n_{{dataset}}.png",
            caption="../report/fl_accuracy_vs_n.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/figures/fl_accuracy_vs_n_{{dataset}}.pdf",
        report(
            f"{FLR}/figures/fl_critical_difference_{{dataset}}.png",
            caption="../report/fl_critical_difference.rst",
            category=FL_SECTION,
        ),
        f"{FLR}/figures/fl_critical_difference_{{dataset}}.pdf",
    params:
        dgpbench=DGPBENCH,
        stem=lambda wc: f"{FLR}/figures/fl_accuracy_vs_n_{wc.dataset}",
        cd=lambda wc: f"{FLR}/figures/fl_critical_difference_{wc.dataset}",
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=8000,
        runtime=30,
    log:
        f"{LOGS}/fl/figure/{{dataset}}.log",
    benchmark:
        f"{BENCH}/fl/figure/{{dataset}}.tsv"
    shell:
        "{params.dgpbench} fl-figure {input:q} --dataset {wildcards.dataset:q} --out {params.stem:q}"
        " --cd-out {params.cd:q}"
        " > {log:q} 2>&1"


rule failing_loudly:
    """Failing loudly's grid: tables, summary and one figure per data set (the default target
    where failing_loudly.default_target is set: see the Snakefile)."""
    input:
        rules.fl_report.output,
        expand(f"{FLR}/figures/fl_accuracy_vs_n_{{dataset}}.png", dataset=DATASETS),
        expand(f"{FLR}/figures/fl_critical_difference_{{dataset}}.png", dataset=DATASETS),


wildcard_constraints:
    shift="[a-z_+]+",
    flmodel=f"none|{MODEL_ID_PATTERN}",
    representation="[a-z_]+",
    flmethod=r"classif|[a-z_]+\+[a-z0-9_]+",
