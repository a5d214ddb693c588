# Report categories: the paper's sections (snakemake --report; captions in workflow/report/).
SHIFT_SECTION = "Section 5.2 - covariate shift detection"
ABLATION_SECTION = "Section 5.3 - ablation of DGP"
CALIBRATION_SECTION = "Appendix - calibration"
BEYOND_SECTION = "Beyond the paper - new shifts and CNNs"
COMPARISON_SECTION = "Table 1 - published vs reproduced"


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
    shell:
        "{DGPBENCH} aggregate --out {output} {input} > {log} 2>&1"


rule tables:
    """Table 1, the ablation tables, the calibration and the AUROC table (CSV, Markdown, LaTeX);
    the tables beyond the paper (new shifts, CNNs), with a note where the config has none."""
    input:
        rules.aggregate.output,
    output:
        report(
            f"{RESULTS}/tables/table1_shift_detection.csv",
            caption="../report/table1_shift_detection.rst",
            category=SHIFT_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table1_shift_detection", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table2_ablation.csv",
            caption="../report/table2_ablation.rst",
            category=ABLATION_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table2_ablation", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_appendix_ablation_full.csv",
            caption="../report/table_appendix_ablation_full.rst",
            category=ABLATION_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_appendix_ablation_full", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_appendix_calibration.csv",
            caption="../report/table_appendix_calibration.rst",
            category=CALIBRATION_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_appendix_calibration", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_auroc.csv",
            caption="../report/table_auroc.rst",
            category=SHIFT_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_auroc", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_beyond_shifts.csv",
            caption="../report/table_beyond_shifts.rst",
            category=BEYOND_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_beyond_shifts", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_cnn.csv",
            caption="../report/table_cnn.rst",
            category=BEYOND_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_cnn", ".md", ".tex"),
        report(
            f"{RESULTS}/tables/table_cnn_calibration.csv",
            caption="../report/table_cnn_calibration.rst",
            category=BEYOND_SECTION,
        ),
        multiext(f"{RESULTS}/tables/table_cnn_calibration", ".md", ".tex"),
    params:
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
        "{DGPBENCH} tables --records {input} --methods {params.methods}"
        " --ablation-datasets {params.ablation} --ablation-ns {params.ablation_ns}"
        " --pool-deltas {params.pool} --alpha {params.alpha}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule figures:
    """Detection ratio figures (Gaussian noise by n, by delta, all corruptions), the
    calibration figure, and the shifts beyond the paper and the CNNs."""
    input:
        rules.aggregate.output,
    output:
        report(
            f"{RESULTS}/figures/fig_gn_by_n.png",
            caption="../report/fig_gn_by_n.rst",
            category=SHIFT_SECTION,
        ),
        f"{RESULTS}/figures/fig_gn_by_n.pdf",
        report(
            f"{RESULTS}/figures/fig_gn_by_delta.png",
            caption="../report/fig_gn_by_delta.rst",
            category=SHIFT_SECTION,
        ),
        f"{RESULTS}/figures/fig_gn_by_delta.pdf",
        report(
            f"{RESULTS}/figures/fig_overview.png",
            caption="../report/fig_overview.rst",
            category=SHIFT_SECTION,
        ),
        f"{RESULTS}/figures/fig_overview.pdf",
        report(
            f"{RESULTS}/figures/fig_calibration.png",
            caption="../report/fig_calibration.rst",
            category=CALIBRATION_SECTION,
        ),
        f"{RESULTS}/figures/fig_calibration.pdf",
        report(
            f"{RESULTS}/figures/fig_beyond.png",
            caption="../report/fig_beyond.rst",
            category=BEYOND_SECTION,
        ),
        f"{RESULTS}/figures/fig_beyond.pdf",
    params:
        methods=join(config["methods"]),
        pool=join(config["report"]["pool_deltas"]),
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
        "{DGPBENCH} figures --records {input} --methods {params.methods}"
        " --pool-deltas {params.pool} --out-dir {params.out_dir} > {log} 2>&1"


rule compare:
    """Published vs reproduced Table 1: for report.pool_deltas and each computed delta set."""
    input:
        records=rules.aggregate.output,
        published=published_table1(),
    output:
        report(
            f"{RESULTS}/tables/comparison_table1.csv",
            caption="../report/comparison_table1.rst",
            category=COMPARISON_SECTION,
        ),
        f"{RESULTS}/tables/comparison_table1.md",
        [
            [
                report(
                    f"{RESULTS}/tables/comparison_table1_{label}.csv",
                    caption="../report/comparison_table1.rst",
                    category=COMPARISON_SECTION,
                ),
                f"{RESULTS}/tables/comparison_table1_{label}.md",
            ]
            for label in comparison_sets()
        ],
        report(
            f"{RESULTS}/tables/comparison_table1_summary.csv",
            caption="../report/comparison_table1.rst",
            category=COMPARISON_SECTION,
        ),
    params:
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
        "{DGPBENCH} compare --records {input.records} --pool-deltas {params.pool} {params.sets}"
        " {params.published} --out-dir {params.out_dir} > {log} 2>&1"
