# shellcheck shell=sh
# whoami.sh prints the user it runs as: the host check's command.
id -un
