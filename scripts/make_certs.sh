#!/usr/bin/env bash
# Creates a cluster CA and node certificates for bigset's mutual TLS, with
# Debian's openssl: DIR/ca.pem, DIR/ca.key, and per node DIR/node-<id>.pem
# and DIR/node-<id>.key (subject common name "node-<id>", signed by the
# CA). For tests and examples; an operator would keep the CA key offline.
#
# Usage: bash scripts/make_certs.sh DIR NODE_ID...
#   CA_DIR=OTHER  sign with the CA already in OTHER instead of a new one.
#   CN_OF_<id>=X  give node <id>'s certificate the common name X instead.
set -euo pipefail
dir="$1"
shift
mkdir -p "$dir"
ca_dir="${CA_DIR:-$dir}"
if [[ ! -f "$ca_dir/ca.pem" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$ca_dir/ca.key" -out "$ca_dir/ca.pem" -days 3650 \
    -subj "/CN=bigset test CA $RANDOM" 2>/dev/null
fi
if [[ "$ca_dir" != "$dir" ]]; then
  cp "$ca_dir/ca.pem" "$dir/ca.pem"
fi
for id in "$@"; do
  cn_var="CN_OF_${id}"
  cn="${!cn_var:-node-$id}"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/node-$id.key" -out "$dir/node-$id.csr" \
    -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$dir/node-$id.csr" -CA "$ca_dir/ca.pem" \
    -CAkey "$ca_dir/ca.key" -CAcreateserial -out "$dir/node-$id.pem" \
    -days 3650 2>/dev/null
  rm -f "$dir/node-$id.csr"
done
