# Online detectors on streams (target `stream`, not part of `all`): for every model of the
# grid and every stream method, the clean streams' run times per ERT and the shifted streams'
# detection delays (`dgpbench stream`), pooled into a table and a figure
# (`dgpbench stream-report`). The features are the `features` rule's files, and with
# `stream.fl_shifts` those of Failing loudly's image shifts of the same clean test images
# (`dgpbench stream-shifts`, every image altered: row i is the twin of clean row i). The
# helpers (ST, stream_records) are in common.smk.
from dgpbench.cli.stream_eval import fl_twin_key

# Failing loudly's shifts by corruption code: {"FLGN": ["large_gn_shift"], ...}
ST_FL = {}
for _shift in ST["fl_shifts"]:
    ST_FL.setdefault(fl_twin_key(_shift)[0], []).append(_shift)
ST_FL_KEYS = [f"{code}_{level}" for code, level in map(fl_twin_key, ST["fl_shifts"])]


rule stream_shifts:
    """Failing loudly's image shifts of every clean test image, one file per kind (FLGN, FLIMG)."""
    input:
        rules.images.output,
    output:
        f"{RESULTS}/stream/images/{{dataset}}/{{flcode}}.npz",
    wildcard_constraints:
        flcode="FLGN|FLIMG",
    params:
        dgpbench=DGPBENCH,
        shifts=lambda wc: join(ST_FL[wc.flcode]),
        seed=config["images"]["seed"],
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        f"{LOGS}/stream/images/{{dataset}}/{{flcode}}.log",
    shell:
        "{params.dgpbench} stream-shifts --images {input} --shifts {params.shifts}"
        " --seed {params.seed} --out {output} > {log} 2>&1"


rule stream_features:
    """Features of Failing loudly's shifted images, by one model and method (the clean test
    images again: `dgpbench stream` checks that they match the `features` rule's)."""
    input:
        model=model_input,
        clean=rules.images.output,
        shifted=expand(f"{RESULTS}/stream/images/{{{{dataset}}}}/{{code}}.npz", code=ST_FL),
    output:
        f"{RESULTS}/stream/features/{{dataset}}/{{model}}/{{method}}.npz",
    params:
        dgpbench=DGPBENCH,
        model=model_argument,
        batch_size=config["features"]["batch_size"],
        device=config["features"]["device"],
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{LOGS}/stream/features/{{dataset}}/{{model}}/{{method}}.log",
    shell:
        "{params.dgpbench} features --method {wildcards.method} --model {params.model:q}"
        " --clean {input.clean} --corrupted {input.shifted}"
        " --batch-size {params.batch_size} --device {params.device} --threads {threads}"
        " --out {output} > {log} 2>&1"


rule stream_run:
    """Clean and shifted streams of one model and method: one record per stream."""
    input:
        features=rules.features.output,
        fl=rules.stream_features.output if ST_FL else [],
    output:
        f"{RESULTS}/stream/{{dataset}}/{{model}}/{{method}}.csv",
    params:
        dgpbench=DGPBENCH,
        s=ST,
        detectors=join(ST["detectors"]),
        erts=join(ST["erts"]),
        shifts=join([f"{c}_{ST_INTENSITY}" for c in ST_SHIFTS] + ST_FL_KEYS),
        options=" ".join(
            f"--{key.replace('_', '-')} {ST[key]}"
            for key in ("change_point", "n_bootstraps", "bootstraps_per_ert")
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
        "{params.dgpbench} stream --features {input.features} {input.fl} --detectors {params.detectors}"
        " --erts {params.erts} --shifts {params.shifts} --n-ref {params.s[n_ref]}"
        " --window-size {params.s[window_size]} --n-streams {params.s[n_streams]}"
        " --n-shift-streams {params.s[n_shift_streams]} --max-factor {params.s[max_factor]}"
        " --cvm-calibration {params.s[cvm_calibration]} {params.options}"
        " --reference-splits {params.s[reference_splits]} --seed {params.s[seed]} --tag dataset={wildcards.dataset}"
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
