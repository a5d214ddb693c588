# Tables, figures and published-vs-reproduced comparisons of the shift-detection grid
# (snakemake --report gathers them; sections and helpers in report_common.smk).


include: "report_common.smk"


rule aggregate:
    """All bootstrap records of the grid in one table."""
    input:
        all_records(),
    output:
        f"{RESULTS}/aggregate/records.csv.gz",
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/aggregate.log",
    benchmark:
        f"{BENCH}/aggregate.tsv"
    params:
        dgpbench=DGPBENCH,
    shell:
        "{params.dgpbench} aggregate --out {output} {input} > {log} 2>&1"


rule tables:
    """Table 1, the ablation tables, the calibration and the AUROC table (CSV, Markdown, LaTeX);
    the tables beyond the paper (new shifts, CNNs), with a note where the config has none."""
    input:
        rules.aggregate.output,
    output:
        table_files("table1_shift_detection", SHIFT_SECTION, COMPUTES["table1"]),
        table_files("table1_ranks", SHIFT_SECTION, COMPUTES["table1"]),
        table_files("table2_ablation", ABLATION_SECTION, COMPUTES["ablation"]),
        table_files("table_appendix_ablation_full", ABLATION_SECTION, COMPUTES["ablation"]),
        table_files("table_appendix_calibration", CALIBRATION_SECTION, COMPUTES["calibration"]),
        table_files("table_auroc", SHIFT_SECTION, COMPUTES["table1"]),
        table_files("table_beyond_shifts", BEYOND_SECTION, COMPUTES["beyond_shifts"]),
        table_files("table_cnn", BEYOND_SECTION, COMPUTES["cnn"]),
        table_files("table_cnn_calibration", BEYOND_SECTION, COMPUTES["cnn"]),
    params:
        dgpbench=DGPBENCH,
        methods=join(config["methods"]),
        ablation=join(ABLATION) or "none",
        ablation_ns=join(config["ablation"]["ns"]),
        pool=join(config["report"]["pool_deltas"]),
        alpha=config["protocol"]["alpha"],
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/tables.log",
    benchmark:
        f"{BENCH}/tables.tsv"
    shell:
        "{params.dgpbench} tables --records {input} --methods {params.methods}"
        " --ablation-datasets {params.ablation} --ablation-ns {params.ablation_ns}"
        " --pool-deltas {params.pool} --alpha {params.alpha}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule figures:
    """Detection ratio figures (Gaussian noise by n, by delta, all corruptions), the
    calibration figure, and the shifts beyond the paper and the CNNs."""
    input:
        rules.aggregate.output,
    output:
        figure_files("fig_gn_by_n", SHIFT_SECTION, COMPUTES["gn"]),
        figure_files("fig_gn_by_delta", SHIFT_SECTION, COMPUTES["gn"]),
        figure_files("fig_overview", SHIFT_SECTION, COMPUTES["table1"]),
        figure_files("fig_calibration", CALIBRATION_SECTION, COMPUTES["calibration"]),
        figure_files("fig_beyond", BEYOND_SECTION, COMPUTES["beyond_figure"]),
    params:
        dgpbench=DGPBENCH,
        methods=join(config["methods"]),
        pool=join(config["report"]["pool_deltas"]),
        alpha=config["protocol"]["alpha"],
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/figures.log",
    benchmark:
        f"{BENCH}/figures.tsv"
    shell:
        "{params.dgpbench} figures --records {input} --methods {params.methods}"
        " --pool-deltas {params.pool} --alpha {params.alpha} --out-dir {params.out_dir}"
        " > {log} 2>&1"


COMPARISON_ITEM = (
    "../report/comparison_table1.rst",
    COMPARISON_SECTION,
    COMPUTES["comparison"],
)


rule compare:
    """Published vs reproduced Table 1: for report.pool_deltas and each computed delta set."""
    input:
        records=rules.aggregate.output,
        published=published_table1(),
    output:
        in_report(f"{RESULTS}/tables/comparison_table1.csv", *COMPARISON_ITEM),
        f"{RESULTS}/tables/comparison_table1.md",
        [
            [
                in_report(f"{RESULTS}/tables/comparison_table1_{label}.csv", *COMPARISON_ITEM),
                f"{RESULTS}/tables/comparison_table1_{label}.md",
            ]
            for label in comparison_sets()
        ],
        in_report(f"{RESULTS}/tables/comparison_table1_summary.csv", *COMPARISON_ITEM),
    params:
        dgpbench=DGPBENCH,
        pool=join(config["report"]["pool_deltas"]),
        sets=" ".join(
            f"--delta-set {shlex.quote(label + '=' + ','.join(str(d) for d in deltas))}"
            for label, deltas in comparison_sets().items()
        ),
        published=" ".join(f"--published {shlex.quote(p)}" for p in published_table1()),
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/compare.log",
    benchmark:
        f"{BENCH}/compare.tsv"
    shell:
        "{params.dgpbench} compare --records {input.records} --pool-deltas {params.pool} {params.sets}"
        " {params.published} --out-dir {params.out_dir} > {log} 2>&1"


rule compare_paper:
    """Published vs reproduced ablation (Table 2 + appendix) and false detection rates."""
    input:
        rules.aggregate.output,
    output:
        [
            [
                report(
                    f"{RESULTS}/tables/comparison_{name}.csv",
                    caption=f"../report/comparison_{name}.rst",
                    category=COMPARISON_PAPER_SECTION,
                ),
                report(
                    f"{RESULTS}/tables/comparison_{name}_summary.csv",
                    caption=f"../report/comparison_{name}.rst",
                    category=COMPARISON_PAPER_SECTION,
                ),
                f"{RESULTS}/tables/comparison_{name}.md",
            ]
            for name in ("table2_ablation", "calibration")
        ],
    params:
        dgpbench=DGPBENCH,
        pool=join(config["report"]["pool_deltas"]),
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/compare_paper.log",
    benchmark:
        f"{BENCH}/compare_paper.tsv"
    shell:
        "({params.dgpbench} compare-paper table2_ablation --input {input} --pool-deltas {params.pool}"
        " --out-dir {params.out_dir}"
        " && {params.dgpbench} compare-paper calibration --input {input} --out-dir {params.out_dir})"
        " > {log} 2>&1"
