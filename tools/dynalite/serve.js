#!/usr/bin/env node
// dynalite on 127.0.0.1 for the test suite, the demo and the benchmarks.
//
//   node serve.js [--port N]     (0, the default: a free port)
//
// Prints its URL on one line once listening, then serves from memory until stdin closes or it
// gets SIGTERM/SIGINT: a parent that dies (even by kill -9) closes the pipe, so a killed test
// run leaves no server behind. Tables become ACTIVE at once (no CREATING delay to wait out).
'use strict'

const dynalite = require('dynalite')

const argv = process.argv.slice(2)
const at = argv.indexOf('--port')
const port = at >= 0 ? Number(argv[at + 1]) : 0
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`serve.js: --port takes a port number (0 for a free one), got ${argv[at + 1]}`)
  process.exit(2)
}

// dynalite rethrows the error of a request whose client went away mid-body (a worker killed with
// kill -9 by the torture tests, a connection reset by the fault proxy), which would end the whole
// server. DynamoDB just drops such a request: do the same, and still die on anything else.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error(`dynalite: a client went away mid-request (${err.message}); request dropped`)
    return
  }
  console.error(err)
  process.exit(1)
})

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
server.listen(port, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}`)
})

const stop = () => server.close(() => process.exit(0))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
process.stdin.on('end', stop)
process.stdin.on('error', stop)
process.stdin.resume()
