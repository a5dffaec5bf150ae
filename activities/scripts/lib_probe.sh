# shellcheck shell=sh
# The probe's functions, included by the scripts that probe.
#
# The probe reads /proc directly: one exec, no ps, no login shell. Every
# process it forks costs the host more than the whole SSH exec otherwise
# does, so it forks five (getconf twice, one awk for /proc/meminfo and
# /proc/stat, date and id), and only one, date, when the caller knows the
# host for this boot: what stays until a reboot is not read again, and the
# host's CPU ticks come from the first line of /proc/stat, read by the
# shell itself.

# probe_host BOOT_ID HZ PAGE MEM BOOT_TIME CPUS USER [ACCOUNT] prints the
# H line. The arguments are what a probe before learned of the host, for
# the boot BOOT_ID names; with no BOOT_ID, or another boot, the host is
# read in full (USER too), and a BOOT_ID of another boot sets rebooted.
# An empty USER is read again (user_as): an op's probe checks whom it ran
# as every time. It sets t1, the host's CPU ticks now.
probe_host() {
  LC_ALL=C; export LC_ALL
  bid=; { read -r bid < /proc/sys/kernel/random/boot_id; } 2>/dev/null
  rebooted=; [ -z "${1-}" ] || [ "$bid" = "$1" ] || rebooted=1
  acct=${8-}
  if [ -n "$bid" ] && [ "$bid" = "${1-}" ]; then
    hz=$2 pg=$3 mem=$4 bt=$5 ncpu=$6 u=${7-}
    [ -n "$u" ] || user_as "$acct"
    ticks; t1=$tk
  else
    hz=$(getconf CLK_TCK 2>/dev/null); hz=${hz:-100}
    pg=$(getconf PAGESIZE 2>/dev/null); pg=${pg:-4096}
    # shellcheck disable=SC2046 # awk prints four numbers, one word each
    set -- $(awk '/^MemTotal:/{m=$2*1024} /^btime/{b=$2} /^cpu[0-9]/{n++} /^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i} END{printf "%.0f %.0f %d %.0f", m, b, n, t}' /proc/meminfo /proc/stat 2>/dev/null)
    mem=$1 bt=$2 ncpu=${3:-1} t1=$4
    user_as "$acct"
  fi
  # An op's own checks need no clock (noclock set): only status and
  # supervision report the host's time and zone.
  if [ -n "${noclock-}" ]; then d='0 '; else d=$(date '+%s %Z%z'); fi
  printf 'H\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ncpu" "$hz" "${mem:-0}" "${bt:-0}" "${d%% *}" "${d#* }" "$pg" "$u" "$bid"
}

# user_as ACCOUNT sets u to the user this shell runs as. USER in the
# environment is trusted when it is ACCOUNT: sshd sets it for the login
# user, sudo for the account it switched to. Otherwise id -un, which
# costs the host a process.
user_as() {
  u=${USER-}; [ -n "$u" ] && [ "$u" = "$1" ] || u=$(id -un)
}

# ticks sets tk to the host's CPU ticks now, from the first line of
# /proc/stat, read by the shell itself.
ticks() {
  read -r _ c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 _ < /proc/stat
  tk=$((${c1:-0}+${c2:-0}+${c3:-0}+${c4:-0}+${c5:-0}+${c6:-0}+${c7:-0}+${c8:-0}+${c9:-0}+${c10:-0}))
}

# statof PID sets st to /proc/PID/stat after the ") " that ends the comm
# field; it fails when there is no such process.
statof() {
  st=; { IFS= read -r st < "/proc/$1/stat"; } 2>/dev/null || [ -n "$st" ] || return 1
  case $st in *") "*) ;; *) st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1 ;; esac
  st=${st##*) }
}

# f20 sets s20 to its 20th argument: the start time, in a stat's fields.
f20() { s20=${20}; }

# pidin FILE sets pid to the pid FILE holds, or to nothing. The common
# form, one line of digits, is read by the shell itself; anything else
# goes through head, tr and cut.
pidin() {
  pid=; more=; { IFS= read -r pid; IFS= read -r more; } < "$1" 2>/dev/null
  case $pid in ''|*[!0-9]*|??????????*) pid= ;; esac
  [ -n "$pid" ] && [ -z "$more" ] || pid=$(head -c 64 "$1" 2>/dev/null | tr -cd '0-9' | cut -c1-9)
}

# cut4k cuts cl to its first 4096 bytes, in the shell: a pipe to head
# would cost every probe two processes more, for the rare long line.
cut4k() {
  q='????????'; q=$q$q; q=$q$q; q=$q$q; q=$q$q; q=$q$q; q=$q$q; q=$q$q; q=$q$q; q=$q$q
  # shellcheck disable=SC2295 # q is a pattern: 4096 of any byte
  cl=${cl%"${cl#$q}"}
}

# guard_holds GUARD PIDFILE: whether an op guarded by GUARD may run its
# command with no probe before it. "none" holds when PIDFILE names no live
# process (no file, no pid in it, no such process, or a zombie): no probe
# could find the process alive, so a start runs. "PID STARTTICKS" holds
# when PIDFILE names that very incarnation, not a zombie: one an op or a
# poll found alive, which a stop may end. Otherwise the op probes.
guard_holds() {
  pid=; [ ! -e "$2" ] || pidin "$2"
  if [ -n "$pid" ] && statof "$pid"; then
    # shellcheck disable=SC2086 # the stat's fields, one word each
    set -- "$1" $st
    if [ "$2" = Z ]; then [ "$1" = none ]; return; fi
    [ "$1" = "$pid ${21}" ]; return
  fi
  [ "$1" = none ]
}

# probe_pids WINDOW N FILE KNOWN ... samples the N pid files, each followed
# by KNOWN: "PID STARTTICKS" of the incarnation a poll before found alive
# (its exe and cmdline are then not read again: a pid and start time name
# one process until the host reboots, so not after probe_host found it
# rebooted), or "". With a sampling WINDOW (in
# seconds, not 0) it samples the host's and each process's CPU ticks
# twice, so cpu% is a current rate, not a lifetime average; the second
# sample is of the pid the first one read. It needs t1 (probe_host).
probe_pids() {
  window=$1 n=$2 i=0; shift 2
  while [ "$i" -lt "$n" ]; do
    f=$1 k=$2; shift 2
    [ -z "${rebooted-}" ] || k=
    found=0; pid=""; st=""; exe=""; cl=""
    if [ -e "$f" ]; then found=1; pidin "$f"; fi
    eval "pid$i=\$pid"
    if [ -n "$pid" ] && statof "$pid"; then
      s20=
      # shellcheck disable=SC2086 # the stat's fields, one word each
      [ -z "$k" ] || f20 $st
      if [ -z "$k" ] || [ "$k" != "$pid $s20" ]; then
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null)
        case $exe in *[[:cntrl:]]*) exe=$(readlink "/proc/$pid/exe" 2>/dev/null | tr '\t\n' '  ') ;; esac
        cl=$(tr '\000\t\n' '\t  ' < "/proc/$pid/cmdline" 2>/dev/null)
        [ ${#cl} -le 4096 ] || cut4k
      fi
    fi
    printf 'P\t%d\t%s\t%s\t%s\n' "$i" "$found" "$pid" "$st"
    printf 'X\t%d\t%s\n' "$i" "$exe"
    printf 'C\t%d\t%s\n' "$i" "$cl"
    i=$((i+1))
  done
  if [ "$window" != 0 ]; then
    sleep "$window"; ticks; t2=$tk; i=0
    while [ "$i" -lt "$n" ]; do
      eval "pid=\$pid$i"
      # shellcheck disable=SC2086 # the stat's fields, one word each
      if [ -n "$pid" ] && statof "$pid"; then set -- $st; printf 'Q\t%d\t%s\t%s\n' "$i" "${12}" "${13}"; fi
      i=$((i+1))
    done
    printf 'T\t%s\t%s\n' "$t1" "$t2"
  else
    printf 'T\t%s\t%s\n' "$t1" "$t1"
  fi
}
