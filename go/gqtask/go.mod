module gqtask

go 1.16

require (
	github.com/gofrs/uuid v3.2.0+incompatible
	github.com/mcmathja/curlyq v1.0.0-rc2
	github.com/vmihailenco/msgpack/v4 v4.3.7
)
