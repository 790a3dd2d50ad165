#!/usr/bin/env bash
# The consumer test: installs bigset into a temporary prefix and builds and
# runs the README's code snippets as an embedder would:
#   (a) against bigset.pc, shared libraries;
#   (b) against bigset.pc with --static, in a prefix holding only the static
#       library;
#   (c) from a Meson project that uses bigset as a subproject;
#   (d) a program using the simulator, against bigset_testing.pc.
# Every snippet is a complete program that checks its own results.
# Usage: bash scripts/consumer_test.sh  (exit status 0 when all pass)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

bash scripts/install-deps.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cxx="${CXX:-g++}"

# The snippets, extracted from README.md: each code block that follows a
# line "<!-- snippet: NAME.cc -->".
mkdir -p "$work/src"
python3 - "$work/src" <<'PY'
import re, sys
text = open("README.md").read()
found = re.findall(r"<!-- snippet: ([\w.]+) -->\s*```cpp\n(.*?)```", text, re.S)
if not found:
    sys.exit("README.md has no snippets")
for name, code in found:
    open(f"{sys.argv[1]}/{name}", "w").write(code)
    print(f"snippet {name}: {code.count(chr(10))} lines")
PY

# Install into $prefix. CI runs this after scripts/test.sh: its build-test
# (warnings as errors) is installed as it is, staged with --destdir and its
# pkg-config files pointed at the stage. Elsewhere only the installed
# targets are built here, unoptimized (plain): this checks how the library
# installs and links, not how fast it runs.
if [[ -f build-test/build.ninja ]]; then
  read -r inst_prefix inst_libdir < <(meson introspect build-test \
    --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["libdir"])')
  ninja -C build-test >/dev/null
  meson install -C build-test --no-rebuild --destdir "$work/stage" >/dev/null
  mv "$work/stage$inst_prefix" "$prefix"
  libdir="$prefix/$inst_libdir"
  sed -i "s|^prefix=.*|prefix=$prefix|" "$libdir"/pkgconfig/*.pc
else
  build="$work/build"
  meson setup "$build" --buildtype=plain --prefix="$prefix" --libdir=lib \
    -Dwerror=true >/dev/null
  targets=$(meson introspect "$build" --targets | python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin):
    if t["installed"]:
        for f in t["filename"]:
            print(os.path.relpath(f, build))' "$build")
  # shellcheck disable=SC2086
  ninja -C "$build" $targets >/dev/null
  meson install -C "$build" --no-rebuild >/dev/null
  libdir="$prefix/lib"
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"

passed=0
run() {  # run NAME COMMAND...: runs a built program, reports the result.
  local name="$1"
  shift
  if "$@" >"$work/$name.out" 2>&1; then
    echo "consumer $name: ok ($(tail -n 1 "$work/$name.out"))"
    passed=$((passed + 1))
  else
    echo "consumer $name: FAILED" >&2
    cat "$work/$name.out" >&2
    exit 1
  fi
}

# (a) Shared.
for snippet in local_sets replica_deltas; do
  # shellcheck disable=SC2046
  "$cxx" -std=c++20 -Wall -Werror -o "$work/$snippet.shared" \
    "$work/src/$snippet.cc" $(pkg-config --cflags --libs bigset) \
    -Wl,--disable-new-dtags,-rpath,"$libdir"
  run "$snippet (shared)" "$work/$snippet.shared" "$work/db-$snippet-shared"
done

# (b) Static: a copy of the prefix without the shared library.
static_prefix="$work/static-prefix"
cp -r "$prefix" "$static_prefix"
static_libdir="$static_prefix/${libdir#"$prefix"/}"
rm -f "$static_libdir"/libbigset.so* "$static_libdir"/libbigset_testing.so*
sed -i "s|$prefix|$static_prefix|g" "$static_libdir"/pkgconfig/*.pc
for snippet in local_sets replica_deltas; do
  # shellcheck disable=SC2046
  "$cxx" -std=c++20 -Wall -Werror -o "$work/$snippet.static" \
    "$work/src/$snippet.cc" \
    $(PKG_CONFIG_PATH="$static_libdir/pkgconfig" pkg-config --static \
      --cflags --libs bigset)
  if ldd "$work/$snippet.static" | grep -q libbigset; then
    echo "consumer $snippet (static): linked libbigset.so" >&2
    exit 1
  fi
  run "$snippet (static)" "$work/$snippet.static" "$work/db-$snippet-static"
done

# (c) Meson subproject.
proj="$work/subproject"
mkdir -p "$proj/subprojects/bigset"
tar --exclude='./build*' --exclude='./.git' -cf - . |
  tar -xf - -C "$proj/subprojects/bigset"
cp "$work/src/local_sets.cc" "$proj/main.cc"
cat >"$proj/meson.build" <<'MESON'
project('consumer', 'cpp', default_options : ['cpp_std=c++20'])
bigset = dependency('bigset', fallback : ['bigset', 'bigset_dep'])
executable('consumer', 'main.cc', dependencies : bigset)
MESON
(cd "$proj" && meson setup build --buildtype=plain >/dev/null &&
  ninja -C build consumer >/dev/null)
run "local_sets (meson subproject)" "$proj/build/consumer" "$work/db-sub"

# (d) The testing library.
# shellcheck disable=SC2046
"$cxx" -std=c++20 -Wall -Werror -o "$work/simulator" "$work/src/simulator.cc" \
  $(pkg-config --cflags --libs bigset_testing) -Wl,--disable-new-dtags,-rpath,"$libdir"
run "simulator (bigset_testing)" "$work/simulator"

# The tool is installed with the library and works from the prefix.
tool_db="$work/tool-db"
"$prefix/bin/bigset" --db "$tool_db" --create add fruits apple quince >/dev/null
tool_out="$("$prefix/bin/bigset" --db "$tool_db" members fruits | tr '\n' ' ')"
if [[ "$tool_out" != "apple quince " ]]; then
  echo "consumer: installed bigset tool printed '$tool_out'" >&2
  exit 1
fi
echo "consumer bigset tool (installed): ok (fruits: $tool_out)"
passed=$((passed + 1))

echo "consumer test: $passed programs built and ran"
