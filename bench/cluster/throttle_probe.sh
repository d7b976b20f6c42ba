#!/usr/bin/env bash
# How the testbed's emulated disks behave: reads through a cgroup v1 blkio throttle
# (blkio.throttle.read_bps_device, as bench/cluster/run.sh sets per device), read with O_DIRECT
# by one reader in 1 MiB requests:
#   - sustained: one long read, the rate the device profiles measure;
#   - bursts: after an idle gap, N MiB read at once, for several N; the rate of each burst.
# A constant-rate disk reads every burst at the sustained rate. The kernel's throttle accounts
# in slices (100 ms by default) and, when a slice starts, allows a slice's worth of bytes at
# once, so a reader that was idle reads a burst of up to rate x slice at the physical disk's
# speed. Streaming devices that read a few MiB between idle gaps (small buffers, k >= 2) then
# read faster than their profiled rate, which the cost model cannot know
# (docs/cluster-bench.md, "Limits of the emulation").
#
# Usage: throttle_probe.sh [--rate MBPS (596)] [--file PATH] [--gap-ms MS (300)]
# Needs root and cgroup v1 blkio. Prints one line per measurement and a JSON summary.
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

RATE=596 FILE="" GAP=300
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --file) FILE=$2; shift 2 ;;
    --gap-ms) GAP=$2; shift 2 ;;
    *) echo "throttle_probe.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $EUID -eq 0 ]] || { echo "throttle_probe.sh: must run as root" >&2; exit 2; }
[[ -w "$HC_CGROOT/blkio" ]] || { echo "throttle_probe.sh: cgroup v1 blkio not writable at $HC_CGROOT/blkio" >&2; exit 2; }
TMPF=""
if [[ -z "$FILE" ]]; then
  FILE=$(mktemp /var/tmp/hearth-throttle-probe.XXXXXX)
  TMPF=$FILE
  # 512 MiB of incompressible data on the disk the cluster benchmark uses.
  head -c $((512 << 20)) /dev/urandom > "$FILE"
  sync
fi
[[ -r "$FILE" ]] || { echo "throttle_probe.sh: cannot read '$FILE'" >&2; exit 2; }

CG="$HC_CGROOT/blkio/hearth-throttle-probe-$$"
mkdir "$CG"
cleanup() {
  rmdir "$CG" 2>/dev/null || true
  if [[ -n "$TMPF" ]]; then rm -f "$TMPF"; fi
}
trap cleanup EXIT
echo "$(hc_block_device "$FILE") $((RATE * 1000000))" > "$CG/blkio.throttle.read_bps_device"
echo 3 > /proc/sys/vm/drop_caches

# The reader runs inside the cgroup: this shell moves itself there first.
python3 - "$FILE" "$GAP" "$RATE" "$CG" <<'EOF'
import json, mmap, os, sys, time
path, gap_ms, rate, cg = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
with open(os.path.join(cg, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
size = os.fstat(fd).st_size
chunk = 1 << 20
buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
off = 0

def read_mib(n):
    global off
    t0 = time.perf_counter()
    for _ in range(n):
        if off + chunk > size:
            off = 0
        os.preadv(fd, [buf], off)
        off += chunk
    return time.perf_counter() - t0

out = {"rate_mbps": rate, "gap_ms": gap_ms, "file": path}
# Sustained: 2 s worth at the set rate (at most the file).
n = max(16, min(size // chunk - 1, int(rate * 2 / 1.048576)))
t = read_mib(n)
out["sustained_mbps"] = n * chunk / t / 1e6
print(f"sustained: {n} MiB in {t * 1e3:.0f} ms = {out['sustained_mbps']:.0f} MB/s (set {rate:.0f})")
bursts = []
for mib in (1, 2, 4, 8, 16, 32, 64, 128):
    rates = []
    for _ in range(3):
        time.sleep(gap_ms / 1e3)
        t = read_mib(mib)
        rates.append(mib * chunk / t / 1e6)
    rates.sort()
    med = rates[1]
    bursts.append({"mib": mib, "mbps": med})
    print(f"burst after {gap_ms:.0f} ms idle: {mib:4d} MiB at {med:6.0f} MB/s "
          f"({med / rate:.1f}x the set rate)")
out["bursts"] = bursts
print(json.dumps(out))
EOF
