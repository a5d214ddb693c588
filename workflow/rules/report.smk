rule aggregate:
    """All bootstrap records of the grid in one table."""
    input:
        all_records(),
    output:
        f"{RESULTS}/aggregate/records.csv.gz",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/aggregate.log",
    benchmark:
        f"{BENCH}/aggregate.tsv"
    shell:
        "dgpbench aggregate --out {output} {input} > {log} 2>&1"


rule tables:
    """Table 1, the ablation tables and the calibration table (CSV, Markdown, LaTeX)."""
    input:
        rules.aggregate.output,
    output:
        multiext(
            f"{RESULTS}/tables/table1_shift_detection", ".csv", ".md", ".tex"
        ),
        multiext(f"{RESULTS}/tables/table2_ablation", ".csv", ".md", ".tex"),
        multiext(
            f"{RESULTS}/tables/table_appendix_ablation_full", ".csv", ".md", ".tex"
        ),
        multiext(
            f"{RESULTS}/tables/table_appendix_calibration", ".csv", ".md", ".tex"
        ),
    params:
        methods=join(config["methods"]),
        ablation=join(ABLATION) or "none",
        ablation_ns=join(config["ablation"]["ns"]),
        pool=join(config["report"]["pool_deltas"]),
        alpha=config["protocol"]["alpha"],
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/tables.log",
    benchmark:
        f"{BENCH}/tables.tsv"
    shell:
        "dgpbench tables --records {input} --methods {params.methods}"
        " --ablation-datasets {params.ablation} --ablation-ns {params.ablation_ns}"
        " --pool-deltas {params.pool} --alpha {params.alpha}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule figures:
    """Detection ratio figures: Gaussian noise by n, by delta, and all corruptions."""
    input:
        rules.aggregate.output,
    output:
        multiext(f"{RESULTS}/figures/fig_gn_by_n", ".png", ".pdf"),
        multiext(f"{RESULTS}/figures/fig_gn_by_delta", ".png", ".pdf"),
        multiext(f"{RESULTS}/figures/fig_overview", ".png", ".pdf"),
    params:
        methods=join(config["methods"]),
        pool=join(config["report"]["pool_deltas"]),
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/figures.log",
    benchmark:
        f"{BENCH}/figures.tsv"
    shell:
        "dgpbench figures --records {input} --methods {params.methods}"
        " --pool-deltas {params.pool} --out-dir {params.out_dir} > {log} 2>&1"


rule compare:
    """Published vs reproduced Table 1: for report.pool_deltas and each computed delta set."""
    input:
        records=rules.aggregate.output,
        published=published_table1(),
    output:
        multiext(f"{RESULTS}/tables/comparison_table1", ".csv", ".md"),
        [
            multiext(f"{RESULTS}/tables/comparison_table1_{label}", ".csv", ".md")
            for label in comparison_sets()
        ],
        f"{RESULTS}/tables/comparison_table1_summary.csv",
    params:
        pool=join(config["report"]["pool_deltas"]),
        sets=" ".join(
            f"--delta-set {shlex.quote(label + '=' + ','.join(str(d) for d in deltas))}"
            for label, deltas in comparison_sets().items()
        ),
        published=" ".join(f"--published {shlex.quote(p)}" for p in published_table1()),
        out_dir=lambda wc, output: Path(output[0]).parent,
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/compare.log",
    benchmark:
        f"{BENCH}/compare.tsv"
    shell:
        "dgpbench compare --records {input.records} --pool-deltas {params.pool} {params.sets}"
        " {params.published} --out-dir {params.out_dir} > {log} 2>&1"
