#!/usr/bin/env bash
# Slurm (slurmctld, slurmd, sbatch...) and munge from Debian's packages, for the Slurm tests of
# make test-services (tests/services/slurm_cluster.py configures and starts them on 127.0.0.1).
#   services/slurm.sh        installs slurm-wlm and munge when missing and run as root; idempotent
# Nothing is configured or started here: the packages' own services stay stopped (no systemd in a
# container; the tests start their daemons by hand with their own key, ports and folders).
# Not root and missing: a WARNING, exit 0 - the other services tests still run, and the Slurm ones
# then say what is missing (and fail under VQALAB_SERVICES_REQUIRED=1).
set -euo pipefail
PACKAGES=(slurm-wlm munge)
have() { PATH=$PATH:/usr/sbin:/sbin command -v "$1" >/dev/null; }
if have slurmctld && have slurmd && have sbatch && have munged; then exit 0; fi
if ! command -v apt-get >/dev/null; then
  echo "WARNING: no apt-get: install Slurm (slurmctld, slurmd, sbatch) and munge by hand for the Slurm tests" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "WARNING: Slurm is not installed and this is not root: run 'sudo apt-get install -y --no-install-recommends ${PACKAGES[*]}' for the Slurm tests" >&2
  exit 0
fi
exec 1>&2  # progress on stderr, as the other services scripts
apt-get update -qq
# policy-rc.d 101: the packages' postinst must not start their daemons (a container's invoke-rc.d may try)
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$POLICY" && chmod +x "$POLICY"
  trap 'rm -f "$POLICY"' EXIT
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
have slurmctld && have slurmd && have sbatch && have munged
echo "slurm: $(PATH=$PATH:/usr/sbin slurmctld -V)"
