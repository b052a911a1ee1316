# spec/bench/nginx_limit_req.sh: sourced by the bench scripts.  A local
# nginx in $DIR (its config, logs, www/ok.txt; its PID in $PIDFILE) on a
# free loopback port, with `limit_req` at RATE requests a second (burst 0,
# 429 beyond), every path answered with ok.txt; sets PORT.  The caller
# stops it by $PIDFILE on exit.
#   start_limit_req_nginx NAME RATE      (NAME prefixes the error messages)
start_limit_req_nginx() {
  # a free port: ask the kernel through a short-lived listener
  PORT=$(lua5.4 -e 'local s = assert(require("socket").bind("127.0.0.1", 0)); local _, p = s:getsockname(); print(p); s:close()')
  mkdir -p "$DIR/logs" "$DIR/tmp" "$DIR/www"
  echo ok > "$DIR/www/ok.txt"
  chmod 755 "$DIR" "$DIR/www"   # nginx's workers read it as another user
  cat > "$DIR/nginx.conf" <<CONF
worker_processes 1;
pid $PIDFILE;
error_log $DIR/logs/error.log;
events { worker_connections 1024; }
http {
  access_log $DIR/logs/access.log;
  client_body_temp_path $DIR/tmp;
  proxy_temp_path $DIR/tmp;
  fastcgi_temp_path $DIR/tmp;
  uwsgi_temp_path $DIR/tmp;
  scgi_temp_path $DIR/tmp;
  limit_req_zone \$server_name zone=one:1m rate=${2}r/s;
  limit_req_status 429;
  server {
    listen 127.0.0.1:$PORT;
    server_name bench;
    root $DIR/www;
    # a file, not a return directive: that answers in the rewrite phase, before limit_req
    location / { limit_req zone=one; try_files /ok.txt =404; }
  }
}
CONF
  "$NGINX" -p "$DIR" -c "$DIR/nginx.conf" || { echo "$1: nginx did not start" >&2; exit 1; }
  for _ in $(seq 50); do [ -s "$PIDFILE" ] && break; sleep 0.1; done
}
