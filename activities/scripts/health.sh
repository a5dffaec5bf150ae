# shellcheck shell=sh
# health.sh SETUP HEALTH_CMD SECONDS
# Runs health_cmd in setup_path for at most SECONDS (then TERM, and KILL
# 2 s later) and prints its exit status: 124 or 137 when it ran out of
# time. A watch poll runs it as each spec's account.
cd "$1" 2>/dev/null || :; timeout -k 2 "$3" sh -c "$2" </dev/null >/dev/null 2>&1; echo $?
