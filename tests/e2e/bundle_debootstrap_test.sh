#!/usr/bin/env bash
# The relocatable bundle (scripts/bundle.sh) used as an engine image would use it: unpacked into a
# fresh Debian 12 root made by debootstrap (minbase: none of servesweep's build dependencies),
# where `servesweep --help`, `servesweep sim` and a `bench` against it must run, the libraries
# found through the bundle's $ORIGIN rpath alone.
#   bundle_debootstrap_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
# Needs root (chroot, mounts) and debootstrap (scripts/install-deps.sh); exits 77 (skipped) and
# says why without them. The Debian packages are fetched once into a debootstrap tarball under
# /var/cache/servesweep (deb.debian.org), then every run unpacks a fresh root from it.
set -euo pipefail
source_dir=$1 build_dir=$2 work=$3
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root for chroot and mounts (CI runs as root)"
command -v debootstrap >/dev/null || skip "debootstrap is missing (scripts/install-deps.sh installs it)"

cache=/var/cache/servesweep
tarball=$cache/debootstrap-bookworm-minbase.tgz
mirror=http://deb.debian.org/debian
rm -rf "$work"
mkdir -p "$work" "$cache"
root=$work/root
cleanup() {
  [ -n "${sim_pid:-}" ] && kill "$sim_pid" 2>/dev/null || true
  for m in "$root/dev" "$root/proc"; do mountpoint -q "$m" && umount -l "$m"; done
  rm -rf "$root" "$work/servesweep-bundle.tar"
}
trap cleanup EXIT

start=$(date +%s)
if [ ! -s "$tarball" ]; then
  debootstrap --variant=minbase --make-tarball="$tarball.partial" bookworm "$work/download" "$mirror" \
    > "$work/debootstrap-download.log" 2>&1 || { tail -20 "$work/debootstrap-download.log"; exit 1; }
  mv "$tarball.partial" "$tarball"
  rm -rf "$work/download"
fi
debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
echo "fresh Debian 12 root in $(( $(date +%s) - start )) s: $(chroot "$root" cat /etc/debian_version)"

# None of the build dependencies: the bundle must bring them.
for lib in libzmq.so.5 libcapnp-0.9.2.so libyaml-cpp.so.0.7 libfmt.so.9 libcurl.so.4 libsqlite3.so.0; do
  if [ -n "$(find "$root/usr/lib" "$root/lib" -name "$lib" 2>/dev/null | head -1)" ]; then
    echo "FAIL: the fresh root already has $lib"; exit 1
  fi
done

cuda=()
ldd "$build_dir/servesweep" | grep -q libcudart && cuda=(--with-cuda)  # no CUDA in the root
"$source_dir/scripts/bundle.sh" --build "$build_dir" --out "$work/servesweep-bundle.tar" "${cuda[@]}"
mkdir -p "$root/opt"
tar -C "$root/opt" -xf "$work/servesweep-bundle.tar"
bin=/opt/servesweep/bin/servesweep
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"

chroot "$root" "$bin" --help > "$work/help.txt"
grep -q "^Usage:" "$work/help.txt" || { echo "FAIL: servesweep --help printed no usage"; cat "$work/help.txt"; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chroot "$root" "$bin" sim --host 127.0.0.1 --port "$port" --model bundled --ttft-ms 2 --itl-ms 1 \
  > "$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
chroot "$root" "$bin" bench --url "http://127.0.0.1:$port" --model bundled --concurrency 4 \
  --num-requests 20 --input-len 16 --output-len 8 --result-json /tmp/bench.json > "$work/bench.log" 2>&1 ||
  { echo "FAIL: bench in the fresh root"; cat "$work/bench.log" "$work/sim.log"; exit 1; }
completed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["completed"])' "$root/tmp/bench.json")
[ "$completed" = "20" ] || { echo "FAIL: bench completed $completed of 20"; cat "$work/bench.log"; exit 1; }
echo "PASS: --help, sim and bench (20 of 20 requests) ran from the bundle in a fresh Debian 12 root" \
  "($(head -2 "$root/opt/servesweep/BUNDLE.txt" | tail -1)); $(( $(date +%s) - start )) s"
