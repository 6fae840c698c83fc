listenPort = 8000
error("boom")
