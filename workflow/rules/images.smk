rule images:
    """Labelled reference images and clean test images of one data set."""
    input:
        data=data_file(DATASETS),
    output:
        f"{RESULTS}/images/{{dataset}}/clean.npz",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        images=lookup(within=config, dpath="images"),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        f"{LOGS}/images/{{dataset}}.log",
    benchmark:
        f"{BENCH}/images/{{dataset}}.tsv"
    shell:
        "{params.dgpbench} images --dataset {params.name:q} {params.data}"
        " --n-refs {params.images[n_refs]} --n-test {params.images[n_test]}"
        " --seed {params.images[seed]} --out {output} > {log} 2>&1"


rule corrupt:
    """The corrupted twins of the clean test images, one file per corruption (all intensities)."""
    input:
        rules.images.output,
    output:
        f"{RESULTS}/images/{{dataset}}/{{corruption}}.npz",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        intensities=join(config["intensities"]),
        seed=config["images"]["seed"],
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        f"{LOGS}/corrupt/{{dataset}}/{{corruption}}.log",
    benchmark:
        f"{BENCH}/corrupt/{{dataset}}/{{corruption}}.tsv"
    shell:
        "{params.dgpbench} corrupt --dataset {params.name:q} --images {input} --corruption {wildcards.corruption}"
        " --intensities {params.intensities} --seed {params.seed} --out {output} > {log} 2>&1"
