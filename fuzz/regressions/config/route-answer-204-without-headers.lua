listen = 8000
function route(req) return { status = 204 } end
