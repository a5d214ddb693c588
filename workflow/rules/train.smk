rule train:
    """Train every seed of one MLP (per data set x hidden size x layers) at once, as one
    stacked model; each seed gets its own folder, as if trained alone."""
    input:
        data=data_file(DATASETS),
    output:
        model=seed_files("model.pt"),
        metrics=seed_files("metrics.csv"),
    wildcard_constraints:
        hidden="[0-9]+",
        layers="[0-9]+",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        seeds=join(config["models"]["seeds"]),
        activation=config["models"]["activation"],
        train=lookup(within=config, dpath="training"),
        out_dir=lambda wc: f"{RESULTS}/models/{wc.dataset}",
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=240,
    log:
        f"{LOGS}/train/{{dataset}}/h{{hidden}}-l{{layers}}.log",
    benchmark:
        f"{BENCH}/train/{{dataset}}/h{{hidden}}-l{{layers}}.tsv"
    shell:
        "{params.dgpbench} train --dataset {params.name:q} {params.data} --hidden {wildcards.hidden}"
        " --layers {wildcards.layers} --seeds {params.seeds}"
        " --activation {params.activation} --lr {params.train[lr]}"
        " --epochs {params.train[epochs]} --batch-size {params.train[batch_size]}"
        " --val-fraction {params.train[val_fraction]} --device {params.train[device]}"
        " --threads {threads} --out-dir {params.out_dir:q} > {log} 2>&1"
