#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for dgpbench's SLURM tests and for
# trying the workflow's SLURM profile (workflow/profiles/slurm).
#
#   bash scripts/slurm.sh start    # install if needed, configure, start, wait for an idle node
#   bash scripts/slurm.sh status   # daemons, node state; exit 0 only if the cluster takes jobs
#   bash scripts/slurm.sh stop     # stop slurmd, slurmctld, munged by the PIDs in their pidfiles
#
# Debian 12 (slurm-wlm 22.05 + munge), run as root; no systemd needed (the daemons are started
# by hand). `start` is idempotent: packages, config and running daemons are detected and kept.
# The node is called "localhost" whatever the machine's hostname, so a config written on one
# machine stays valid on another. Without accounting (no slurmdbd), `sacct` does not work:
# the profile queries job status with squeue instead (finished jobs stay visible to squeue
# for MinJobAge seconds).
#
# Environment:
#   SLURM_SH_TIMEOUT    seconds to wait, after installation, for the daemons and the node to
#                       become ready (default 60); every client call is bounded by `timeout`.
#   SLURM_SH_OVERWRITE  1 = replace an existing slurm.conf that this script did not write
#                       (it is backed up first); by default such a file is left alone and
#                       `start` fails, so a real cluster's config is never clobbered.
set -euo pipefail

readonly MARKER="# managed-by: dgpbench scripts/slurm.sh"
readonly CONF=/etc/slurm/slurm.conf
readonly NODE=localhost
readonly PACKAGES=(munge slurmctld slurmd slurm-client)
readonly TIMEOUT="${SLURM_SH_TIMEOUT:-60}"
if [[ ! ${TIMEOUT} =~ ^[0-9]+$ ]]; then
    echo "slurm.sh: error: SLURM_SH_TIMEOUT must be whole seconds, got '${TIMEOUT}'" >&2
    exit 1
fi
readonly LOGDIR=/var/log/slurm
# Pidfiles: slurm's two are set in the slurm.conf written below; munged's is its default.
readonly MUNGE_PIDFILE=/run/munge/munged.pid
readonly SLURMCTLD_PIDFILE=/run/slurmctld.pid
readonly SLURMD_PIDFILE=/run/slurmd.pid

log() { printf 'slurm.sh: %s\n' "$*" >&2; }
die() {
    printf 'slurm.sh: error: %s\n' "$*" >&2
    exit 1
}

require_root() {
    [[ ${EUID} -eq 0 ]] ||
        die "must run as root (it installs packages and starts daemons); try: sudo bash $0 $*"
}

# ---------------------------------------------------------------------------------------------
# Processes, always identified by pidfile; the command name is checked so that a stale pidfile
# whose PID was reused by another process is never mistaken for (or signalled as) our daemon.
# ---------------------------------------------------------------------------------------------

# pid_of PIDFILE COMM: print the PID if the pidfile names a live process called COMM.
pid_of() {
    local pidfile=$1 comm=$2 pid
    [[ -r ${pidfile} ]] || return 1
    pid=$(tr -dc '0-9' <"${pidfile}")
    [[ -n ${pid} && -r /proc/${pid}/comm ]] || return 1
    [[ $(cat "/proc/${pid}/comm" 2>/dev/null) == "${comm}" ]] || return 1
    # A killed daemon not yet reaped (state Z, zombie) or dying (X) is not running.
    [[ $(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null) != [ZX] ]] || return 1
    printf '%s\n' "${pid}"
}

# stop_daemon PIDFILE COMM: SIGTERM, wait up to 15 s, then SIGKILL.
stop_daemon() {
    local pidfile=$1 comm=$2 pid i
    if ! pid=$(pid_of "${pidfile}" "${comm}"); then
        log "${comm}: not running"
        return 0
    fi
    log "${comm}: stopping pid ${pid}"
    kill -TERM "${pid}" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        [[ -d /proc/${pid} ]] || break
        sleep 0.1
    done
    if [[ -d /proc/${pid} ]]; then
        log "${comm}: still alive after 15 s, sending SIGKILL to ${pid}"
        kill -KILL "${pid}" 2>/dev/null || true
        sleep 0.5
    fi
    # slurmctld (running as SlurmUser) cannot delete its pidfile in root's /run; a stale one
    # makes Debian's slurmctld prerm call scancel against a dead controller and fail.
    if [[ -f ${pidfile} && $(tr -dc '0-9' <"${pidfile}") == "${pid}" ]]; then
        rm -f "${pidfile}"
    fi
}

# ---------------------------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------------------------

# (Outputs are captured before matching: `cmd | grep -q` can fail under pipefail by SIGPIPE.)
installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == *'install ok installed'* ]]; }

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do installed "${p}" || missing+=("${p}"); done
    ((${#missing[@]})) || return 0
    command -v apt-get >/dev/null ||
        die "missing packages ${missing[*]} and no apt-get (Debian 12 expected)"
    export DEBIAN_FRONTEND=noninteractive
    local apt_opts=(-y -q --no-install-recommends -o Dpkg::Options::=--force-confold)
    # Refresh the package lists only if one of the packages has no install candidate
    # (empty lists on a fresh image), or if the install fails (stale lists: 404s).
    local need_update=0
    for p in "${missing[@]}"; do
        [[ $(apt-cache policy "${p}" 2>/dev/null) =~ Candidate:\ [^\(] ]] || need_update=1
    done
    if ((need_update)); then
        log "apt-get update (no install candidate for some of: ${missing[*]})"
        apt-get update -q </dev/null >&2 || die "apt-get update failed"
    fi
    log "installing ${missing[*]}"
    if ! apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null >&2; then
        ((need_update)) && die "apt-get install ${missing[*]} failed"
        log "install failed; retrying after apt-get update"
        apt-get update -q </dev/null >&2 || die "apt-get update failed"
        apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null >&2 ||
            die "apt-get install ${missing[*]} failed"
    fi
}

write_conf() {
    if [[ -f ${CONF} ]] && grep -qxF -- "${MARKER}" "${CONF}"; then
        log "keeping ${CONF} (written by this script)"
        return 0
    fi
    if [[ -e ${CONF} ]]; then
        [[ ${SLURM_SH_OVERWRITE:-0} == 1 ]] ||
            die "${CONF} exists and was not written by this script; refusing to replace it" \
                "(set SLURM_SH_OVERWRITE=1 to back it up and replace it)"
        local backup
        backup="${CONF}.bak.$(date +%Y%m%d%H%M%S)"
        cp -p "${CONF}" "${backup}"
        log "backed up ${CONF} to ${backup}"
    fi
    local cpus mem_mb
    cpus=$(nproc)
    # MemTotal, as `free -m` reports it (procps is not in minimal Debian images).
    mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
    [[ ${cpus} =~ ^[0-9]+$ && ${mem_mb} =~ ^[0-9]+$ ]] ||
        die "could not read CPUs (${cpus}) or memory (${mem_mb} MB) of this machine"
    install -d -m 0755 /etc/slurm
    local tmp
    tmp=$(mktemp /etc/slurm/.slurm.conf.XXXXXX)
    cat >"${tmp}" <<EOF
${MARKER}
# One-node test cluster on ${NODE}: ${cpus} CPUs (nproc), ${mem_mb} MB (MemTotal) at write time.
# Delete this file and run \`bash scripts/slurm.sh start\` again to regenerate it.
ClusterName=local
SlurmctldHost=${NODE}
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=${SLURMCTLD_PIDFILE}
SlurmdPidFile=${SLURMD_PIDFILE}
SlurmctldLogFile=${LOGDIR}/slurmctld.log
SlurmdLogFile=${LOGDIR}/slurmd.log
# No cgroups: works in containers and without systemd.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Trust the CPU/memory below even where slurmd's hardware probe disagrees (cpusets in
# containers, hyperthreading layout): otherwise the node can come up DRAINED.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
# No accounting (no slurmdbd): sacct is unavailable, status queries go through squeue,
# which keeps finished jobs visible for MinJobAge seconds.
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=300
NodeName=${NODE} CPUs=${cpus} Sockets=1 CoresPerSocket=${cpus} ThreadsPerCore=1 RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
EOF
    chmod 0644 "${tmp}"
    mv -f "${tmp}" "${CONF}"
    log "wrote ${CONF} (${cpus} CPUs, ${mem_mb} MB)"
}

prepare_dirs() {
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o slurm -g slurm -m 0755 /var/spool/slurmctld "${LOGDIR}"
    install -d -m 0755 /var/spool/slurmd
    if [[ ! -s /etc/munge/munge.key ]]; then
        # The munge package's postinst normally creates the key.
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
}

# Daemons fork into the background; their stdio goes to a file so that a caller that captures
# our output (CI) never waits on a pipe a daemon still holds, and startup errors stay readable.
start_munged() {
    local pid
    if pid=$(pid_of "${MUNGE_PIDFILE}" munged); then
        log "munged: already running (pid ${pid})"
    else
        log "munged: starting"
        runuser -u munge -- /usr/sbin/munged </dev/null >>"${LOGDIR}/munged.out" 2>&1 ||
            die "munged failed to start: $(tail -n 5 "${LOGDIR}/munged.out")"
    fi
    while ((SECONDS < DEADLINE)); do
        timeout 5 munge -n </dev/null 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    die "munge does not work after ${TIMEOUT} s (munge -n | unmunge fails);" \
        "see /var/log/munge/munged.log"
}

start_slurmctld() {
    local pid
    if pid=$(pid_of "${SLURMCTLD_PIDFILE}" slurmctld); then
        log "slurmctld: already running (pid ${pid})"
    else
        log "slurmctld: starting"
        /usr/sbin/slurmctld </dev/null >>"${LOGDIR}/slurmctld.out" 2>&1 ||
            die "slurmctld failed to start: $(tail -n 5 "${LOGDIR}/slurmctld.out")"
    fi
    # Every client call is bounded by `timeout`: a hung controller must not hang CI.
    while ((SECONDS < DEADLINE)); do
        [[ $(timeout 5 scontrol ping 2>/dev/null) == *'is UP'* ]] && return 0
        sleep 0.2
    done
    die "slurmctld does not answer (scontrol ping) after ${TIMEOUT} s; last log lines:
$(tail -n 20 "${LOGDIR}/slurmctld.log" 2>/dev/null)"
}

start_slurmd() {
    local pid
    if pid=$(pid_of "${SLURMD_PIDFILE}" slurmd); then
        # Never start a second slurmd: it would kill the running one via the pidfile.
        log "slurmd: already running (pid ${pid})"
    else
        log "slurmd: starting"
        # -N: the node name is fixed ("localhost"), whatever this machine's hostname.
        /usr/sbin/slurmd -N "${NODE}" </dev/null >>"${LOGDIR}/slurmd.out" 2>&1 ||
            die "slurmd failed to start: $(tail -n 5 "${LOGDIR}/slurmd.out")"
    fi
}

node_state() {
    local out
    out=$(timeout 10 sinfo -h -n "${NODE}" -o %T 2>/dev/null) || true
    printf '%s\n' "${out%%$'\n'*}"
}

# A node that takes jobs: idle, or already running some (a second `start` during a run).
node_ready() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

wait_node_ready() {
    local start=${SECONDS} state resumed=0
    while ((SECONDS < DEADLINE)); do
        state=$(node_state)
        if [[ ${state} =~ ^(allocated|completing)$ ]]; then
            log "node ${NODE} is ${state} (busy with jobs) after $((SECONDS - start)) s"
            return 0
        fi
        # sinfo may show the state saved by an earlier slurmctld before slurmd has registered:
        # a one-second job proves that jobs really run.
        if [[ ${state} =~ ^(idle|mixed)$ ]] &&
            timeout 20 srun --immediate=10 -N 1 -n 1 -t 1 --mem=16 -J slurm-sh-probe true \
                </dev/null >/dev/null 2>&1; then
            log "node ${NODE} is ${state} and runs jobs, after $((SECONDS - start)) s"
            return 0
        fi
        # A node left DOWN/DRAINED by an earlier run: resume it once.
        if ((!resumed)) && [[ ${state} =~ ^(down|drain|drained|draining) ]]; then
            log "node ${NODE} is ${state}; resuming it"
            timeout 10 scontrol update NodeName="${NODE}" State=RESUME 2>/dev/null || true
            resumed=1
        fi
        sleep 0.5
    done
    die "node ${NODE} not idle within ${TIMEOUT} s of start (state: '${state:-none}').
sinfo -R: $(timeout 10 sinfo -R 2>&1)
slurmd log tail:
$(tail -n 20 "${LOGDIR}/slurmd.log" 2>/dev/null)
slurmctld log tail:
$(tail -n 20 "${LOGDIR}/slurmctld.log" 2>/dev/null)"
}

cmd_start() {
    require_root start
    install_packages
    write_conf
    prepare_dirs
    # One deadline for all waits below (package installation is not counted).
    DEADLINE=$((SECONDS + TIMEOUT))
    start_munged
    start_slurmctld
    start_slurmd
    wait_node_ready
    log "cluster up: partition debug, node ${NODE}; stop it with: bash $0 stop"
}

cmd_stop() {
    require_root stop
    # slurmd first (it reports to slurmctld), munged last (both authenticate through it).
    stop_daemon "${SLURMD_PIDFILE}" slurmd
    stop_daemon "${SLURMCTLD_PIDFILE}" slurmctld
    stop_daemon "${MUNGE_PIDFILE}" munged
}

cmd_status() {
    local ok=0 pid name pidfile
    for name in munged slurmctld slurmd; do
        case ${name} in
            munged) pidfile=${MUNGE_PIDFILE} ;;
            slurmctld) pidfile=${SLURMCTLD_PIDFILE} ;;
            slurmd) pidfile=${SLURMD_PIDFILE} ;;
        esac
        if pid=$(pid_of "${pidfile}" "${name}"); then
            printf '%-10s running (pid %s)\n' "${name}" "${pid}"
        else
            printf '%-10s not running\n' "${name}"
            ok=1
        fi
    done
    if command -v sinfo >/dev/null; then
        timeout 10 sinfo 2>&1 || true
        node_ready || ok=1
    else
        echo "sinfo: not installed (run: bash $0 start)"
        ok=1
    fi
    return "${ok}"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 {start|stop|status}" >&2
        exit 2
        ;;
esac
