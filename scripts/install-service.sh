#!/usr/bin/env bash
# Install edgeprof as a systemd service: the always-on agent (default) or the nightly timer (--timer).
#
#   sudo bash scripts/install-service.sh                   # enable edgeprof-agent.service (start at boot)
#   sudo bash scripts/install-service.sh --start           # ... and start it now
#   sudo bash scripts/install-service.sh --timer [--start] # enable the 01:00 timer instead of the agent
#   bash scripts/install-service.sh --dry-run [...]        # print what would be done; changes nothing
#
# Options:
#   --timer       enable edgeprof-sweep.timer (nightly `edgeprof agent --once --until 07:00`) and disable
#                 edgeprof-agent.service; without it the reverse. The two modes share one queue: one only.
#   --start       also start the unit now (the agent, or arm the timer). If the other mode is running, it
#                 is stopped first (its current run is marked interrupted and redone on resume).
#   --prefix DIR  the edgeprof checkout set up by scripts/setup.sh (default /opt/edgeprof); the executable
#                 is DIR/.venv/bin/edgeprof, and /opt/edgeprof/ in the units is rewritten to DIR/.
#   --exe PATH    the edgeprof executable to run (default DIR/.venv/bin/edgeprof); `edgeprof service
#                 install` passes the one it was started from, wherever pip installed it.
#   --dry-run     print the commands instead of running them; does not need root.
#
# Idempotent: run it again after `git pull` or to switch mode. It creates the system user `edgeprof`,
# adds it to the groups `jtop` (jetson-stats) and `video` where they exist, creates
# /var/lib/edgeprof/queue/{done,failed}, installs the units into /etc/systemd/system, reloads systemd and
# enables the chosen mode. It never touches power modes, clocks or anything of jetson-stats.
set -euo pipefail

SERVICE_USER=edgeprof
STATE_DIR=/var/lib/edgeprof
UNIT_DIR=/etc/systemd/system
DEFAULT_PREFIX=/opt/edgeprof
AGENT_UNIT=edgeprof-agent.service
SWEEP_UNIT=edgeprof-sweep.service
TIMER_UNIT=edgeprof-sweep.timer
SRC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../systemd" && pwd)"

MODE=agent
START=0
DRY_RUN=0
PREFIX="$DEFAULT_PREFIX"
EXE_OPT=""

say() { printf 'install-service: %s\n' "$*"; }
warn() { printf 'install-service: warning: %s\n' "$*" >&2; }
die() { printf 'install-service: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# Every change to the system goes through run: printed always, executed unless --dry-run.
run() {
  printf '+ %s\n' "$(printf '%q ' "$@" | sed 's/ $//')"
  if [[ $DRY_RUN == 0 ]]; then "$@"; fi
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --timer) MODE=timer ;;
    --start) START=1 ;;
    --dry-run) DRY_RUN=1 ;;
    --prefix)
      [[ $# -ge 2 ]] || die "--prefix needs a directory"
      PREFIX="$2"; shift ;;
    --prefix=*) PREFIX="${1#--prefix=}" ;;
    --exe)
      [[ $# -ge 2 ]] || die "--exe needs a path"
      EXE_OPT="$2"; shift ;;
    --exe=*) EXE_OPT="${1#--exe=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option: $1 (see --help)" ;;
  esac
  shift
done

# A real run fails at its first problem; a dry run reports it and goes on, to show the rest.
problem() {
  if [[ $DRY_RUN == 1 ]]; then warn "$* (a real run stops here)"; else die "$*"; fi
}

[[ $DRY_RUN == 1 || $EUID == 0 ]] || die "must run as root (sudo bash $0 ...), or use --dry-run"
[[ $DRY_RUN == 1 ]] && say "dry run: printing the commands, changing nothing"

# --- the checkout and its executable ------------------------------------------------------------------
[[ "$PREFIX" == /* ]] || die "--prefix must be an absolute path, got '$PREFIX'"
PREFIX="${PREFIX%/}"
[[ -n "$PREFIX" ]] || die "--prefix / is not a checkout"
# The prefix goes into ExecStart= lines and a sed expression: no blanks (systemd would split the command),
# no % (a systemd specifier), no quotes, backslash, # or & (sed).
case "$PREFIX" in
  *[[:space:]%\"\'\\\#\&]*) die "--prefix '$PREFIX': spaces and the characters % \" ' \\ # & are not supported" ;;
esac
EXE="${EXE_OPT:-$PREFIX/.venv/bin/edgeprof}"
[[ "$EXE" == /* ]] || die "--exe must be an absolute path, got '$EXE'"
case "$EXE$SRC_DIR" in
  *[[:space:]%\"\'\\\#\&]*) die "'$EXE' or '$SRC_DIR': spaces and the characters % \" ' \\ # & are not supported" ;;
esac
[[ -x "$EXE" ]] || problem "$EXE not found or not executable: set up the checkout first (cd $PREFIX && bash scripts/setup.sh) or give --prefix DIR"
for unit in "$AGENT_UNIT" "$SWEEP_UNIT" "$TIMER_UNIT"; do
  [[ -f "$SRC_DIR/$unit" ]] || die "missing unit file $SRC_DIR/$unit"
done
if [[ ! -d /run/systemd/system ]]; then
  problem "systemd is not running here (no /run/systemd/system): nothing could be enabled"
fi

# --- user and groups ----------------------------------------------------------------------------------
NOLOGIN=/usr/sbin/nologin
[[ -x $NOLOGIN ]] || NOLOGIN=/sbin/nologin
[[ -x $NOLOGIN ]] || NOLOGIN=/bin/false
if getent passwd "$SERVICE_USER" >/dev/null; then
  say "user $SERVICE_USER exists"
else
  group_opt=(--user-group)
  getent group "$SERVICE_USER" >/dev/null && group_opt=(--gid "$SERVICE_USER")
  run useradd --system "${group_opt[@]}" --home-dir "$STATE_DIR" --no-create-home \
    --shell "$NOLOGIN" --comment "edgeprof benchmark agent" "$SERVICE_USER"
fi

# jtop (jetson-stats' socket) and video (GPU, tegrastats). jetson-stats creates the jtop group; it is not
# created here. A group the system lacks is also dropped from SupplementaryGroups= in the installed units,
# or systemd would refuse to start them (status=216/GROUP).
SUPP_GROUPS=()
for group in jtop video; do
  if ! getent group "$group" >/dev/null; then
    case "$group" in
      jtop) warn "group jtop does not exist (jetson-stats not installed?): the jtop collector will be unavailable; after installing jetson-stats (sudo pip3 install jetson-stats) run this script again" ;;
      *) warn "group $group does not exist: GPU device access may fail" ;;
    esac
    continue
  fi
  SUPP_GROUPS+=("$group")
  if [[ " $(id -nG "$SERVICE_USER" 2>/dev/null || true) " == *" $group "* ]]; then
    say "user $SERVICE_USER already in group $group"
  else
    run usermod -aG "$group" "$SERVICE_USER"
  fi
done

# --- state directory and queue ------------------------------------------------------------------------
# setgid directories so that plans dropped by members of the edgeprof group stay in that group.
for dir in "$STATE_DIR" "$STATE_DIR/queue" "$STATE_DIR/queue/done" "$STATE_DIR/queue/failed"; do
  # Not world-readable: results and plans (which may name private paths) are for the edgeprof group only.
  # 0750 matches the units' StateDirectoryMode=, which systemd re-applies at every start.
  mode=2770
  [[ "$dir" == "$STATE_DIR" ]] && mode=0750
  if [[ -d "$dir" && "$(stat -c '%U:%G %a' "$dir")" == "$SERVICE_USER:$SERVICE_USER ${mode#0}" ]]; then
    say "$dir exists"
  else
    run install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m "$mode" "$dir"
  fi
done

# --- the executable, as the service user will run it ---------------------------------------------------
# Catches a checkout under a home directory the edgeprof user cannot enter, or a venv it cannot read.
if [[ $DRY_RUN == 0 ]]; then
  if ! runuser -u "$SERVICE_USER" -- "$EXE" --help >/dev/null 2>&1; then
    python="$(readlink -f "$PREFIX/.venv/bin/python" || true)"
    die "user $SERVICE_USER cannot run $EXE: it needs to read $PREFIX and the Python the venv links to (${python:-?}); a home directory with mode 0750 or pyenv under /root is not readable. Put the checkout in $DEFAULT_PREFIX and create the venv with the system Python: sudo PYTHON=/usr/bin/python3 bash scripts/setup.sh"
  fi
  say "user $SERVICE_USER can run $EXE"
else
  printf '+ %s\n' "runuser -u $SERVICE_USER -- $EXE --help  # check only"
fi

# --- unit files ---------------------------------------------------------------------------------------
# Rendered with sed (checkout prefix, the groups that exist), written to a temporary file in the unit
# directory and renamed over the old copy, so systemd never reads a half-written unit.
sed_args=(-e "s#^SupplementaryGroups=.*#SupplementaryGroups=${SUPP_GROUPS[*]:-}#")
# The executable and the README as installed (a wheel puts both under site-packages, not under a prefix).
sed_args+=(-e "s#$DEFAULT_PREFIX/.venv/bin/edgeprof#$EXE#g" -e "s#file:$DEFAULT_PREFIX/systemd/#file:$SRC_DIR/#g")
if [[ "$PREFIX" != "$DEFAULT_PREFIX" ]]; then
  sed_args+=(-e "s#$DEFAULT_PREFIX/#$PREFIX/#g")
fi
changed_units=()
for unit in "$AGENT_UNIT" "$SWEEP_UNIT" "$TIMER_UNIT"; do
  src="$SRC_DIR/$unit"
  dest="$UNIT_DIR/$unit"
  rendered="$(sed "${sed_args[@]}" "$src")"
  if [[ -f "$dest" ]] && [[ "$(cat "$dest")" == "$rendered" ]]; then
    say "$dest is up to date"
    continue
  fi
  changed_units+=("$unit")
  tmp="$UNIT_DIR/.$unit.new"
  # (the expressions hold no single quote: --prefix rejects them and group names have none)
  printf "+ sed"
  for ((i = 1; i < ${#sed_args[@]}; i += 2)); do printf " -e '%s'" "${sed_args[$i]}"; done
  printf ' %q > %q\n' "$src" "$tmp"
  if [[ $DRY_RUN == 0 ]]; then
    printf '%s\n' "$rendered" > "$tmp"
  fi
  run chmod 0644 "$tmp"
  run mv -f "$tmp" "$dest"
done
run systemctl daemon-reload

# --- enable one mode, disable the other ---------------------------------------------------------------
# Without systemd (only possible in a dry run) every unit counts as disabled and inactive.
is_enabled() { [[ -d /run/systemd/system ]] && systemctl is-enabled --quiet "$1" 2>/dev/null; }
is_active() { [[ -d /run/systemd/system ]] && systemctl is-active --quiet "$1" 2>/dev/null; }

running_other=()
if [[ $MODE == timer ]]; then
  want="$TIMER_UNIT"
  if is_enabled "$AGENT_UNIT"; then
    run systemctl disable "$AGENT_UNIT"
  fi
  if is_active "$AGENT_UNIT"; then
    running_other+=("$AGENT_UNIT")
  fi
else
  want="$AGENT_UNIT"
  # disable --now: a timer that is only disabled stays armed until the next boot. Stopping the timer does
  # not stop a sweep that is running now (handled below).
  if is_enabled "$TIMER_UNIT" || is_active "$TIMER_UNIT"; then
    run systemctl disable --now "$TIMER_UNIT"
  fi
  if is_active "$SWEEP_UNIT"; then
    running_other+=("$SWEEP_UNIT")
  fi
fi
run systemctl enable "$want"

if [[ $START == 1 ]]; then
  for unit in "${running_other[@]}"; do
    say "stopping $unit (the other mode): its current run is marked interrupted and resumed later"
    run systemctl stop "$unit"
  done
  if [[ $MODE == agent && ${#changed_units[@]} -gt 0 ]] && is_active "$AGENT_UNIT"; then
    warn "$AGENT_UNIT is running with the old unit file; 'systemctl restart $AGENT_UNIT' applies the new one (the current run is interrupted and redone)"
  fi
  run systemctl start "$want"
else
  for unit in "${running_other[@]}"; do
    warn "$unit (the other mode) is still running; stop it first: systemctl stop $unit"
  done
fi

# --- summary ------------------------------------------------------------------------------------------
if [[ $DRY_RUN == 1 ]]; then
  say "dry run done: nothing was changed"
else
  say "done"
fi
say "  user:         $SERVICE_USER (supplementary groups: ${SUPP_GROUPS[*]:-none})"
say "  queue:        $STATE_DIR/queue (done/, failed/)"
say "  database:     $STATE_DIR/edgeprof.db"
say "  executable:   $EXE"
say "  units:        $UNIT_DIR/$AGENT_UNIT, $SWEEP_UNIT, $TIMER_UNIT (changed: ${changed_units[*]:-none})"
if [[ $MODE == timer ]]; then
  if [[ $START == 1 ]]; then
    say "  mode:         nightly timer, enabled and armed (next run: systemctl list-timers $TIMER_UNIT)"
  else
    say "  mode:         nightly timer, enabled; armed at the next boot, or now with: systemctl start $TIMER_UNIT"
  fi
  say "  logs:         journalctl -u $SWEEP_UNIT"
else
  if [[ $START == 1 ]]; then
    say "  mode:         always-on agent, enabled and started"
  else
    say "  mode:         always-on agent, enabled (starts at boot); start now with: systemctl start $AGENT_UNIT"
  fi
  say "  logs:         journalctl -u $AGENT_UNIT -f"
fi
say "  queue a plan: sudo -u $SERVICE_USER cp plan.toml $STATE_DIR/queue/"
say "  status:       sudo -u $SERVICE_USER $EXE status --db $STATE_DIR/edgeprof.db"
