#!/usr/bin/env bash
# A relocatable servesweep: the binary and the shared libraries it needs beyond glibc, found
# through an $ORIGIN rpath, in one tar to unpack anywhere (an engine's container image, a
# shared folder). docs/engines.md#servesweep-inside-an-engine-image.
#
#   scripts/bundle.sh [--build DIR] [--out servesweep-bundle.tar.gz] [--with-cuda]
#                     [--image-libstdcxx]
#
# Layout: servesweep/bin/servesweep (stripped, rpath $ORIGIN/../lib), servesweep/lib/*.so*
# (rpath $ORIGIN), servesweep/BUNDLE.txt (what is in it and the glibc it needs). glibc itself
# (libc, libm, libpthread, libdl, librt, libresolv, the loader) is the image's; so are the CUDA
# driver and, unless --with-cuda, the CUDA runtime libraries of a build with the GPU probes
# (engine images carry their own CUDA; --with-cuda copies them, ~0.5 GB with cuBLASLt).
# The libstdc++ and libgcc_s of the build machine are bundled too, which sets the glibc the
# bundle needs to the build machine's (Debian 12: 2.36, for arc4random); --image-libstdcxx
# leaves them to the image instead (glibc 2.34 and GCC 12's libstdc++ then suffice, e.g.
# Ubuntu 22.04). BUNDLE.txt says which.
# Needs ldd, objdump, strip (binutils) and patchelf (scripts/install-deps.sh).
set -euo pipefail

build=""
out="servesweep-bundle.tar.gz"
with_cuda=0
image_libstdcxx=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --with-cuda) with_cuda=1; shift ;;
    --image-libstdcxx) image_libstdcxx=1; shift ;;
    *) echo "bundle.sh: unknown argument '$1' (expected --build DIR, --out FILE, --with-cuda)" >&2
       exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$build" ]; then
  for candidate in "$root/build-release" "$root/build"; do
    if [ -x "$candidate/servesweep" ]; then build=$candidate; break; fi
  done
fi
binary="$build/servesweep"
if [ ! -x "$binary" ]; then
  echo "bundle.sh: expected a built servesweep in ${build:-build-release or build}, found none" >&2
  exit 1
fi
for tool in ldd objdump strip patchelf tar; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/servesweep/bin" "$stage/servesweep/lib"
cp "$binary" "$stage/servesweep/bin/servesweep"
strip --strip-unneeded "$stage/servesweep/bin/servesweep"

is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*| \
    libresolv.so.*|libutil.so.*|libanl.so.*|libmvec.so.*|libBrokenLocale.so.*|libthread_db.so.*| \
    libnss_*.so.*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
    libcuda.so.*|libnvidia-*.so.*|libcudart.so.*|libcublas*.so.*|libnccl.so.*|libnvrtc*.so.*) return 0 ;;
  esac
  return 1
}

bundled=() expected=()
while read -r name _ path _; do
  [ -n "${path:-}" ] && [ -f "$path" ] || continue
  if is_glibc "$name"; then continue; fi
  if [ "$image_libstdcxx" -eq 1 ]; then
    case "$name" in libstdc++.so.*|libgcc_s.so.*) expected+=("$name"); continue ;; esac
  fi
  if is_cuda "$name"; then
    case "$name" in libcuda.so.*|libnvidia-*) expected+=("$name (the driver)"); continue ;; esac
    if [ "$with_cuda" -eq 0 ]; then expected+=("$name"); continue; fi
  fi
  cp -L "$path" "$stage/servesweep/lib/$name"
  chmod u+w "$stage/servesweep/lib/$name"
  strip --strip-unneeded "$stage/servesweep/lib/$name" 2>/dev/null || true
  patchelf --set-rpath '$ORIGIN' "$stage/servesweep/lib/$name"
  bundled+=("$name")
done < <(ldd "$binary" | awk '/=>/ {print $1, $2, $3, $4}')
patchelf --set-rpath '$ORIGIN/../lib' "$stage/servesweep/bin/servesweep"

# The newest glibc symbol version anything in the bundle refers to: the oldest glibc it runs on.
glibc=$(objdump -T "$stage/servesweep/bin/servesweep" "$stage"/servesweep/lib/*.so* 2>/dev/null |
  grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)
glibcxx=$(objdump -T "$stage/servesweep/bin/servesweep" "$stage"/servesweep/lib/*.so* 2>/dev/null |
  grep -o 'GLIBCXX_[0-9][0-9.]*' | sed 's/GLIBCXX_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)
version=$("$binary" --version 2>/dev/null | head -1 || true)
{
  echo "servesweep bundle: ${version:-servesweep}, built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "needs: glibc >= $glibc (x86_64)$([ "$image_libstdcxx" -eq 1 ] && echo " and the image's libstdc++ with GLIBCXX_$glibcxx (GCC 12 or newer)"), Linux with PR_SET_PDEATHSIG"
  echo "run: servesweep/bin/servesweep (the libraries below are found through its \$ORIGIN rpath)"
  echo "bundled libraries (${#bundled[@]}): ${bundled[*]}"
  if [ ${#expected[@]} -gt 0 ]; then
    echo "expected from the image: ${expected[*]}"
  fi
} > "$stage/servesweep/BUNDLE.txt"

case "$out" in
  *.tar.gz|*.tgz) tar -C "$stage" -czf "$out" servesweep ;;
  *.tar) tar -C "$stage" -cf "$out" servesweep ;;
  *) echo "bundle.sh: expected --out to end in .tar.gz, .tgz or .tar, found '$out'" >&2; exit 2 ;;
esac
cat "$stage/servesweep/BUNDLE.txt"
echo "bundle: $out ($(du -h "$out" | cut -f1))"
