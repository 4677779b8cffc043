module gqtask

go 1.16

require (
	github.com/go-redis/redis/v7 v7.2.0
	github.com/mcmathja/curlyq v1.0.0-rc2
	github.com/vmihailenco/msgpack/v4 v4.3.7
)
