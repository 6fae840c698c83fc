-- demo/php.lua: a PHP site on php-fpm, and an app on a Unix socket (chapter 23).
listen = 8080
backends = { "unix:/run/app.sock" }        -- the default site: an HTTP app on a Unix socket
sites = { ["blog.example.org"] = {
  root = "/srv",                              -- the site's files: index.php, ...
  fastcgi = { backends = { "unix:/run/php/php8.2-fpm.sock" } },
} }
