# demo/certs.sh -- sourced by this chapter's demos after tools/demo-lib.sh:
# a throwaway certificate authority, and certificates it signs, made with
# the openssl command line in $DEMO_TMP (removed when the demo ends). EC
# P-256 keys, quick to make; everything is valid for two days.
#   demo_ca                         $DEMO_TMP/ca.pem and ca.key: "rsp demo CA"
#   demo_cert NAME SUBJECT NAMES    $DEMO_TMP/NAME.pem and NAME.key, signed by
#                                   the CA; NAMES: subjectAltName, e.g.
#                                   "DNS:www.example.com,DNS:example.com"

demo_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=rsp demo CA" -keyout "$DEMO_TMP/ca.key" -out "$DEMO_TMP/ca.pem" 2>/dev/null ||
    demo_fail "openssl could not make the demo CA"
}

demo_cert() {
  local name=$1 subject=$2 names=$3
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subject" \
    -keyout "$DEMO_TMP/$name.key" -out "$DEMO_TMP/$name.csr" 2>/dev/null &&
    printf 'subjectAltName = %s\n' "$names" >"$DEMO_TMP/$name.ext" &&
    openssl x509 -req -in "$DEMO_TMP/$name.csr" -CA "$DEMO_TMP/ca.pem" -CAkey "$DEMO_TMP/ca.key" \
      -CAcreateserial -days 2 -extfile "$DEMO_TMP/$name.ext" -out "$DEMO_TMP/$name.pem" 2>/dev/null ||
    demo_fail "openssl could not make the certificate $name"
}
