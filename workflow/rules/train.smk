rule train:
    """Train one MLP (per data set x hidden size x layers x seed)."""
    input:
        data=data_file(DATASETS),
    output:
        model=f"{RESULTS}/models/{{dataset}}/{{model}}/model.pt",
        metrics=f"{RESULTS}/models/{{dataset}}/{{model}}/metrics.csv",
    params:
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        arch=lambda wc: "--hidden {} --layers {} --seed {}".format(*parse_model_id(wc.model)),
        activation=config["models"]["activation"],
        train=lookup(within=config, dpath="training"),
        out_dir=lambda wc, output: Path(output.model).parent,
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=240,
    log:
        f"{LOGS}/train/{{dataset}}/{{model}}.log",
    benchmark:
        f"{BENCH}/train/{{dataset}}/{{model}}.tsv"
    shell:
        "dgpbench train --dataset {params.name:q} {params.data} {params.arch}"
        " --activation {params.activation} --lr {params.train[lr]}"
        " --epochs {params.train[epochs]} --batch-size {params.train[batch_size]}"
        " --val-fraction {params.train[val_fraction]} --threads {threads}"
        " --out-dir {params.out_dir} > {log} 2>&1"
