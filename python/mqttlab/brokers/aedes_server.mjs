// Runs an Aedes broker for mqttlab: node aedes_server.mjs CONFIG.json
// The config names the loopback host, the plain port and, optionally, a TLS port with its
// certificate and key, and WebSocket ports (ws_port, wss_port over the same certificate).
// Aedes is a library, so this file is the whole "server".
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { createServer as createTlsServer } from 'node:tls'
import { createServer as createHttpServer } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { Aedes } from 'aedes'

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'))

// The default of 100 concurrent deliveries would throttle fan-out benchmarks.
const broker = await Aedes.createBroker({ concurrency: config.concurrency ?? 10000 })

function listen (server, port, label) {
  server.on('error', (err) => {
    console.error(`aedes ${label} listener on ${config.host}:${port}: ${err.message}`)
    process.exit(1)
  })
  server.listen(port, config.host, () => console.log(`aedes ${label} listening on ${config.host}:${port}`))
}

const noDelay = config.no_delay ?? true
const servers = [createServer({ noDelay }, broker.handle)]
listen(servers[0], config.port, 'mqtt')

if (config.tls_port) {
  const tlsServer = createTlsServer({
    cert: readFileSync(config.cert_file),
    key: readFileSync(config.key_file),
    noDelay
  }, broker.handle)
  servers.push(tlsServer)
  listen(tlsServer, config.tls_port, 'mqtts')
}

// MQTT over WebSocket: the upgrade on /mqtt, each connection a stream for broker.handle. `ws`
// answers with the client's first subprotocol (mqtt); it is loaded only when asked for.
async function listenWebSocket (server, port, label) {
  const { WebSocketServer, createWebSocketStream } = await import('ws')
  const wss = new WebSocketServer({ server, path: '/mqtt' })
  wss.on('connection', (socket, request) => {
    if (noDelay) request.socket.setNoDelay(true)
    broker.handle(createWebSocketStream(socket), request)
  })
  servers.push(server)
  listen(server, port, label)
}
if (config.ws_port) await listenWebSocket(createHttpServer(), config.ws_port, 'ws')
if (config.wss_port) {
  await listenWebSocket(createHttpsServer({ cert: readFileSync(config.cert_file), key: readFileSync(config.key_file) }),
    config.wss_port, 'wss')
}

function shutdown () {
  for (const server of servers) server.close()
  broker.close(() => process.exit(0))
  // Connected clients can keep close() waiting; a stop must not hang.
  setTimeout(() => process.exit(0), 2000).unref()
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
