rule detect:
    """Bootstrap draws of the protocol: every corruption x intensity x n x delta, plus the
    clean-vs-clean calibration draws (delta = 0), for one model and method."""
    input:
        rules.features.output,
    output:
        f"{RESULTS}/detect/{{dataset}}/{{model}}/{{method}}.csv",
    params:
        p=lookup(within=config, dpath="protocol"),
        ns=join(config["protocol"]["ns"]),
        deltas=join(config["protocol"]["deltas"]),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        f"{LOGS}/detect/{{dataset}}/{{model}}/{{method}}.log",
    benchmark:
        f"{BENCH}/detect/{{dataset}}/{{model}}/{{method}}.tsv"
    shell:
        "dgpbench detect --features {input} --ns {params.ns} --deltas {params.deltas}"
        " --draws {params.p[draws]} --seed {params.p[seed]} --alpha {params.p[alpha]}"
        " --correction {params.p[correction]} --tag dataset={wildcards.dataset}"
        " --tag model={wildcards.model} --tag method={wildcards.method} --out {output} > {log} 2>&1"
