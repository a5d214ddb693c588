# The CNN family (models.kind: cnn): two conv blocks and an MLP head, and the ResNet family
# (models.kind: resnet: ResNet-18's layout, then the same head), trained with the MLPs'
# protocol. Model ids cnn-h<hidden>-l<layers>-s<seed> and resnet-h...; `train` would match
# them too.


ruleorder: train_cnn > train
ruleorder: train_resnet > train


rule train_cnn:
    """Train one CNN (per data set x head width x head layers x seed)."""
    input:
        data=data_file(DATASETS),
    output:
        model=f"{RESULTS}/models/{{dataset}}/cnn-{{arch}}/model.pt",
        metrics=f"{RESULTS}/models/{{dataset}}/cnn-{{arch}}/metrics.csv",
    wildcard_constraints:
        arch=r"h\d+-l\d+-s\d+",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        arch=lambda wc: "--hidden {} --layers {} --seed {}".format(
            *parse_model_id(wc.arch)[:3]
        ),
        channels=join(config["models"]["cnn_channels"]),
        activation=config["models"]["activation"],
        train=lookup(within=config, dpath="training"),
        out_dir=lambda wc, output: Path(output.model).parent,
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=4000,
        runtime=480,
    log:
        f"{LOGS}/train/{{dataset}}/cnn-{{arch}}.log",
    benchmark:
        f"{BENCH}/train/{{dataset}}/cnn-{{arch}}.tsv"
    shell:
        "{params.dgpbench} train-cnn --dataset {params.name:q} {params.data} {params.arch}"
        " --channels {params.channels} --activation {params.activation}"
        " --lr {params.train[lr]} --epochs {params.train[epochs]}"
        " --batch-size {params.train[batch_size]} --val-fraction {params.train[val_fraction]}"
        " --device {params.train[device]} --threads {threads} --out-dir {params.out_dir:q}"
        " > {log:q} 2>&1"


rule train_resnet:
    """Train one ResNet (per data set x head width x head layers x seed)."""
    input:
        data=data_file(DATASETS),
    output:
        model=f"{RESULTS}/models/{{dataset}}/resnet-{{arch}}/model.pt",
        metrics=f"{RESULTS}/models/{{dataset}}/resnet-{{arch}}/metrics.csv",
    wildcard_constraints:
        arch=r"h\d+-l\d+-s\d+",
    params:
        dgpbench=DGPBENCH,
        name=lambda wc: DATASETS[wc.dataset],
        data=data_args(),
        arch=lambda wc: "--hidden {} --layers {} --seed {}".format(
            *parse_model_id(wc.arch)[:3]
        ),
        channels=join(config["models"]["resnet_channels"]),
        blocks=join(config["models"]["resnet_blocks"]),
        activation=config["models"]["activation"],
        train=lambda wc: resnet_training(wc.dataset),
        out_dir=lambda wc, output: Path(output.model).parent,
    threads: 2
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=6000,
        runtime=720,
    log:
        f"{LOGS}/train/{{dataset}}/resnet-{{arch}}.log",
    benchmark:
        f"{BENCH}/train/{{dataset}}/resnet-{{arch}}.tsv"
    shell:
        "{params.dgpbench} train-cnn --kind resnet --dataset {params.name:q} {params.data}"
        " {params.arch} --channels {params.channels} --blocks {params.blocks}"
        " --activation {params.activation}"
        " --lr {params.train[lr]} --epochs {params.train[epochs]}"
        " --batch-size {params.train[batch_size]} --val-fraction {params.train[val_fraction]}"
        " --device {params.train[device]} --threads {threads} --out-dir {params.out_dir:q}"
        " > {log:q} 2>&1"
