#!/usr/bin/env bash
# Build librdkafka v2.15.0 and its C perf tool, rdkafka_performance, into an ignored folder
# (bench/.rdkafka by default, or $RDKAFKA_DIR), for `bench/run.py --client c` and bench/cluster_bench.py.
#
# Sources come from the npm registry (the only source of librdkafka reachable from the bench machines):
#   - @confluentinc/kafka-javascript@1.10.0 ships librdkafka 2.15.0's source in package/deps/librdkafka
#     (configure, src/) but not its examples/;
#   - node-rdkafka@3.6.1 ships librdkafka 2.12.0 including examples/rdkafka_performance.c.
# The library is 2.15.0; rdkafka_performance.c (2.12.0's, whose public API 2.15.0 keeps) is compiled
# against 2.15.0's headers and static library. rd_kafka_version_str() in the tool's banner says 2.15.0.
# Nothing fetched here is committed: the folder is in .gitignore.
#
# It also compiles our own rate-paced producer, bench/lat_producer.c (committed, ours), into the same
# bin/ folder as lat_producer for bench/latency_bench.py (rebuilt when the .c file is newer).
#
#   bench/build_rdkafka.sh            # prints the path of rdkafka_performance on its last line
#   RDKAFKA_DIR=/tmp/rdk bench/build_rdkafka.sh
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DEST="${RDKAFKA_DIR:-$HERE/.rdkafka}"
LIB_PKG="@confluentinc/kafka-javascript@1.10.0"
TOOL_PKG="node-rdkafka@3.6.1"
WANT_VERSION="2.15.0"
BIN="$DEST/bin/rdkafka_performance"
LAT_BIN="$DEST/bin/lat_producer"
JOBS="${JOBS:-$(nproc)}"

build_lat_producer() {
    local src="$DEST/dl/lib/deps/librdkafka"
    local libs
    libs="$(sed -n 's/^LIBS+=//p' "$src/Makefile.config" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    cc -O2 -Wall -Wextra -Werror -isystem "$src/src" -o "$LAT_BIN" "$HERE/lat_producer.c" "$src/src/librdkafka.a" \
        $libs -lpthread -lm -ldl -lrt
}

if [[ -x "$BIN" && "${1:-}" != "--force" ]]; then
    if [[ ! -x "$LAT_BIN" || "$HERE/lat_producer.c" -nt "$LAT_BIN" ]]; then
        build_lat_producer
    fi
    echo "$BIN"
    exit 0
fi

mkdir -p "$DEST/dl" "$DEST/bin"
cd "$DEST/dl"
if [[ ! -d lib/deps/librdkafka ]]; then
    rm -rf lib && tgz="$(npm pack --silent "$LIB_PKG" | tail -n1)"
    mkdir lib && tar xzf "$tgz" -C lib --strip-components=1 && rm -f "$tgz"
fi
if [[ ! -f tool/deps/librdkafka/examples/rdkafka_performance.c ]]; then
    rm -rf tool && tgz="$(npm pack --silent "$TOOL_PKG" | tail -n1)"
    mkdir tool && tar xzf "$tgz" -C tool --strip-components=1 && rm -f "$tgz"
fi

SRC="$DEST/dl/lib/deps/librdkafka"
ver_hex="$(sed -n 's/^#define RD_KAFKA_VERSION *0x\([0-9a-f]*\).*/\1/p' "$SRC/src/rdkafka.h")"
ver="$((16#${ver_hex:0:2})).$((16#${ver_hex:2:2})).$((16#${ver_hex:4:2}))"
if [[ "$ver" != "$WANT_VERSION" ]]; then
    echo "expected librdkafka $WANT_VERSION in $LIB_PKG, found $ver" >&2
    exit 1
fi

cd "$SRC"
if [[ ! -f src/librdkafka.a ]]; then
    # a plain-TCP perf client: no TLS, no SASL/GSSAPI, no OAuth HTTP, no external compression libraries
    ./configure --disable-ssl --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext \
        >"$DEST/configure.log" 2>&1 \
        || { tail -n 30 "$DEST/configure.log" >&2; exit 1; }
    make -C src -j"$JOBS" librdkafka.a >"$DEST/make.log" 2>&1 || { tail -n 30 "$DEST/make.log" >&2; exit 1; }
fi

# the libraries the static archive needs, as configure found them (ssl, zlib, ...)
LIBS="$(sed -n 's/^LIBS+=//p' Makefile.config | tr '\n' ' ')"
mkdir -p examples
cp "$DEST/dl/tool/deps/librdkafka/examples/rdkafka_performance.c" examples/
cc -O2 -I src -o "$BIN" examples/rdkafka_performance.c src/librdkafka.a $LIBS -lpthread -lm -ldl -lrt
banner="$("$BIN" -h 2>&1 || true)"
[[ "$banner" == *"librdkafka version $WANT_VERSION "* ]] || {
    echo "built $BIN does not report librdkafka $WANT_VERSION" >&2; exit 1; }
build_lat_producer
echo "$BIN"
