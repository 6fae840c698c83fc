listen = 8000
backends = { "127.0.0.1:1" 
[[unfinished long string
