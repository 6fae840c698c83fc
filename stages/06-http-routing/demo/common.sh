# demo/common.sh -- sourced by this stage's demos after tools/demo-lib.sh.
#   start_site             starts demo/backend.py as alpha, bravo and charlie on
#                          free ports and rsp with demo/rsp.lua on $proxy (the
#                          config's ports replaced by those)
#   ask 'REQUEST'          sends REQUEST (printf escapes: \r\n) on a new
#                          connection and prints the status line of the answer
#   H                      'Host: www.example.com\r\n'
proxy=$(demo_port)
H='Host: www.example.com\r\n'

start_site() {
  alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
  demo_start alpha "$DEMO_PYTHON" demo/backend.py alpha "$alpha"
  demo_start bravo "$DEMO_PYTHON" demo/backend.py bravo "$bravo"
  demo_start charlie "$DEMO_PYTHON" demo/backend.py charlie "$charlie"
  demo_wait_port "$alpha"; demo_wait_port "$bravo"; demo_wait_port "$charlie"
  sed -e "s/\b8000\b/$proxy/; s/\b8001\b/$alpha/; s/\b8002\b/$bravo/; s/\b8003\b/$charlie/" \
    demo/rsp.lua >"$DEMO_TMP/rsp.lua"
  demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
}

ask() {
  exec 3<>"/dev/tcp/127.0.0.1/$proxy"
  printf "$1" >&3
  timeout 5 head -n 1 <&3 | tr -d '\r'
  exec 3>&-
}
