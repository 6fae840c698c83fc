-- demo/files.lua: a site from a folder, compressed (chapter 21).
listen = 8080
root = "/usr/share/doc"          -- any directory: Debian's documentation here
compress = true
