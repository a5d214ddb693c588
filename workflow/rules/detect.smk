rule detect:
    """Bootstrap draws of the protocol: every corruption x intensity x n x delta, plus the
    clean-vs-clean calibration draws (delta = 0), for one model and method; with
    label_shift.intensities also the knock-out label-shift draws (KO, on the clean features)."""
    input:
        features=rules.features.output,
        labels=rules.images.output if LABEL_SHIFT else [],
    output:
        f"{RESULTS}/detect/{{dataset}}/{{model}}/{{method}}.csv",
    params:
        dgpbench=DGPBENCH,
        p=protocol_params(),
        ns=join(config["protocol"]["ns"]),
        deltas=join(config["protocol"]["deltas"]),
        label_shift=lambda wc, input: (
            f"--labels {shlex.quote(str(input.labels))} --knockout-intensities "
            f"{join(LABEL_SHIFT)} --knockout-class {config['label_shift']['knockout_class']}"
            if LABEL_SHIFT
            else ""
        ),
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
        "{params.dgpbench} detect --features {input.features} {params.label_shift} --ns {params.ns} --deltas {params.deltas}"
        " --draws {params.p[draws]} --seed {params.p[seed]} --alpha {params.p[alpha]}"
        " --correction {params.p[correction]} --tag dataset={wildcards.dataset}"
        " --tag model={wildcards.model} --tag method={wildcards.method} --out {output} > {log} 2>&1"
