# The DGP paper's protocol with other two-sample tests than KS on the same draws
# (protocol.tests), and table_tests_power: which test gives each method the most power at
# the same level. Nothing runs unless protocol.tests names a test besides ks.

wildcard_constraints:
    test="[a-z0-9_]+",


rule detect_test:
    """The protocol's draws (every corruption x intensity x n x delta, and the calibration
    draws) of one model and method, decided by another test than KS."""
    input:
        features=rules.features.output,
    output:
        f"{RESULTS}/detect_tests/{{dataset}}/{{model}}/{{method}}/{{test}}.csv",
    params:
        dgpbench=DGPBENCH,
        p=protocol_params("n_permutations"),
        ns=join(config["protocol"]["ns"]),
        deltas=join(config["protocol"]["deltas"]),
    threads: 1
    conda:
        "../envs/dgpbench.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    log:
        f"{LOGS}/detect_tests/{{dataset}}/{{model}}/{{method}}/{{test}}.log",
    benchmark:
        f"{BENCH}/detect_tests/{{dataset}}/{{model}}/{{method}}/{{test}}.tsv"
    shell:
        "{params.dgpbench} detect --features {input.features} --ns {params.ns} --deltas {params.deltas}"
        " --draws {params.p[draws]} --seed {params.p[seed]} --alpha {params.p[alpha]}"
        " --correction {params.p[correction]} --test {wildcards.test}"
        " --n-permutations {params.p[n_permutations]} --tag dataset={wildcards.dataset}"
        " --tag model={wildcards.model} --tag method={wildcards.method} --out {output} > {log} 2>&1"


rule tests_power:
    """table_tests_power: per method and test, the detection ratio at each n pooled as
    Table 1, and the false-positive rate on clean batches."""
    input:
        ks=rules.aggregate.output,
        tests=tests_power_records(),
    output:
        [f"{RESULTS}/tables/table_tests_power.{ext}" for ext in ("csv", "md", "tex", "html")],
    params:
        dgpbench=DGPBENCH,
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
        f"{LOGS}/tests_power.log",
    shell:
        "{params.dgpbench} tests-power --records {input.ks} {input.tests}"
        " --pool-deltas {params.pool} --alpha {params.alpha} --out-dir {params.out_dir} > {log} 2>&1"
