rule features:
    """Fit one method on the reference images (class means), then featurise the clean test
    images once and every corrupted twin (all corruptions x intensities) of one model."""
    input:
        model=model_input,
        clean=rules.images.output,
        corrupted=expand(
            f"{RESULTS}/images/{{{{dataset}}}}/{{corruption}}.npz", corruption=CORRUPTIONS
        ),
    output:
        f"{RESULTS}/features/{{dataset}}/{{model}}/{{method}}.npz",
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
        f"{LOGS}/features/{{dataset}}/{{model}}/{{method}}.log",
    benchmark:
        f"{BENCH}/features/{{dataset}}/{{model}}/{{method}}.tsv"
    shell:
        "{params.dgpbench} features --method {wildcards.method} --model {params.model:q}"
        " --clean {input.clean} --corrupted {input.corrupted}"
        " --batch-size {params.batch_size} --device {params.device} --threads {threads}"
        " --out {output} > {log} 2>&1"
