# shellcheck shell=sh
# watch.sh HEALTH_SH MD5_SH SECONDS BOOT_ID HZ PAGE MEM BOOT_TIME CPUS USER N
#          [PIDFILE KNOWN]*N [CHECK]...
# One supervision poll: the probe of N pid files (what the host's boot is
# known to be in BOOT_ID...USER, see probe_host; KNOWN, see probe_pids),
# then every check, each a group of five arguments:
#   health ACCOUNT I SETUP HEALTH_CMD   health_cmd of entry I (Z line)
#   md5 ACCOUNT I J FILE                md5 of entry I's config file J (M line)
# HEALTH_SH and MD5_SH are health.sh and config_md5.sh ("" with no such
# check). The poll itself runs as the login user; each check runs as its
# ACCOUNT (through sudo; "" when that is the login user), as its spec's
# start and stop do, so it sees what the process sees. Checks run side by side, each bounded by
# SECONDS on its own: a slow one is reported as such (or, for an md5, says
# nothing) and never holds up the poll.
# include: lib_probe.sh
health_sh=$1 md5_sh=$2 secs=$3; shift 3
probe_host "$1" "$2" "$3" "$4" "$5" "$6" "$7"; shift 7
n=$1; shift
probe_pids 0 "$n" "$@"
shift $((2 * n))
while [ $# -ge 5 ]; do
  kind=$1 account=$2 i=$3 a=$4 b=$5; shift 5
  case $kind in
  health)
    # The check prints its exit status itself, so a sudo that refused (no
    # status printed) is told apart from a failing check: it is reported
    # as "sudo", and decides nothing.
    (
      if [ -n "$account" ]; then r=$(sudo -n -u "$account" -- sh -c "$health_sh" drover "$a" "$b" "$secs" 2>/dev/null)
      else r=$(sh -c "$health_sh" drover "$a" "$b" "$secs" 2>/dev/null); fi
      printf 'Z\t%d\t%s\n' "$i" "${r:-sudo}"
    ) &
    ;;
  md5)
    # A config path that never answers (a FIFO, a hung mount) says nothing
    # this poll instead of failing it, and so does one the account cannot
    # read (no line printed); a file that is gone prints an empty md5,
    # which is drift.
    (
      if [ -n "$account" ]; then r=$(sudo -n -u "$account" -- timeout -k 1 "$secs" sh -c "$md5_sh" drover "$b" 2>/dev/null)
      else r=$(timeout -k 1 "$secs" sh -c "$md5_sh" drover "$b" 2>/dev/null); fi
      [ -z "$r" ] || printf 'M\t%d\t%d\t%s\n' "$i" "$a" "${r#gone}"
    ) &
    ;;
  esac
done
wait
