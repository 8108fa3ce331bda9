#!/bin/sh
# Regenerates the loader caches in this directory with the real ldconfig (needs root: -r chroots),
# in its three formats, with `ldconfig -p`'s listing of each (what the parser must agree with).
# The libraries are empty ELF objects whose SONAMEs are the CUDA libraries envdoctor looks for:
# a driver libcuda, its unversioned dev link, a CUDA stub (the classic shadowing trap), NVML,
# cuDNN, the CUDA runtime and a 32-bit libcuda that a 64-bit process must ignore. Seven entries:
# an odd count, so the compat format pads before its new-format table.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
lib64=$root/usr/lib/x86_64-linux-gnu
lib32=$root/usr/lib/i386-linux-gnu
stubs=$root/usr/local/cuda/lib64/stubs
mkdir -p "$root/etc" "$lib64" "$lib32" "$stubs"
echo 'int envdoctor_fixture;' >"$work/f.c"
elf() { # elf DIR SONAME FILE [-m32]
	dir=$1 soname=$2 file=$3
	shift 3
	gcc -shared -fPIC -nostdlib "$@" -Wl,-soname,"$soname" -o "$dir/$file" "$work/f.c"
}
elf "$lib64" libcuda.so.1 libcuda.so.580.159.04
ln -s libcuda.so.580.159.04 "$lib64/libcuda.so.1"
ln -s libcuda.so.1 "$lib64/libcuda.so"
elf "$lib64" libnvidia-ml.so.1 libnvidia-ml.so.580.159.04
elf "$lib64" libcudnn.so.9 libcudnn.so.9.10.2
elf "$lib64" libcudart.so.12 libcudart.so.12.8.90
elf "$stubs" libcuda.so.1 libcuda.so
elf "$lib32" libcuda.so.1 libcuda.so.580.159.04 -m32
printf '%s\n' /usr/lib/x86_64-linux-gnu /usr/lib/i386-linux-gnu /usr/local/cuda/lib64/stubs \
	>"$root/etc/ld.so.conf"
for format in new compat old; do
	ldconfig -r "$root" -X -c "$format" -C "/etc/ld.so.cache" -f /etc/ld.so.conf
	cp "$root/etc/ld.so.cache" "$here/$format.cache"
	ldconfig -r "$root" -p -C /etc/ld.so.cache >"$here/$format.ldconfig-p.txt"
done
ldconfig --version | head -n 1 >"$here/generated-by.txt"
