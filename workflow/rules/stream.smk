# Online detectors on streams (target `stream`, not part of `all`): for every model of the
# grid and every stream method, the clean streams' run times per ERT and the shifted streams'
# detection delays (`dgpbench stream`), pooled into a table and a figure
# (`dgpbench stream-report`). The features are the `features` rule's files. The helpers
# (ST, stream_records) are in common.smk.


rule stream_run:
    """Clean and shifted streams of one model and method: one record per stream."""
    input:
        rules.features.output,
    output:
        f"{RESULTS}/stream/{{dataset}}/{{model}}/{{method}}.csv",
    params:
        dgpbench=DGPBENCH,
        s=ST,
        detectors=join(ST["detectors"]),
        erts=join(ST["erts"]),
        shifts=join(f"{c}_{ST_INTENSITY}" for c in ST_SHIFTS),
        options=" ".join(
            f"--{key.replace('_', '-')} {ST[key]}"
            for key in ("change_point", "n_bootstraps")
            if ST[key] is not None
        ),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=240,
    log:
        f"{LOGS}/stream/{{dataset}}/{{model}}/{{method}}.log",
    benchmark:
        f"{BENCH}/stream/{{dataset}}/{{model}}/{{method}}.tsv"
    shell:
        "{params.dgpbench} stream --features {input} --detectors {params.detectors}"
        " --erts {params.erts} --shifts {params.shifts} --n-ref {params.s[n_ref]}"
        " --window-size {params.s[window_size]} --n-streams {params.s[n_streams]}"
        " --n-shift-streams {params.s[n_shift_streams]} --max-factor {params.s[max_factor]}"
        " --cvm-calibration {params.s[cvm_calibration]} {params.options} --seed {params.s[seed]} --tag dataset={wildcards.dataset}"
        " --tag model={wildcards.model} --tag method={wildcards.method} --out {output} > {log} 2>&1"


rule stream:
    """The `stream` target: mean run time per ERT and mean delay per shift (CSV, Markdown, figure)."""
    input:
        stream_records(),
    output:
        csv=f"{RESULTS}/stream/stream_summary.csv",
        md=f"{RESULTS}/stream/stream_summary.md",
        png=f"{RESULTS}/stream/stream_delays.png",
        pdf=f"{RESULTS}/stream/stream_delays.pdf",
    params:
        dgpbench=DGPBENCH,
        out_dir=lambda wc, output: Path(output.csv).parent,
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        f"{LOGS}/stream/report.log",
    shell:
        "{params.dgpbench} stream-report {input} --out-dir {params.out_dir} > {log} 2>&1"
