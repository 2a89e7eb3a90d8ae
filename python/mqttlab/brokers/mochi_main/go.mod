// mqttlab's runner for Mochi MQTT. install() copies this folder into the broker's data folder
// and sets the require line (and the go line) to the pinned release before `go build`.
module mqttlab/mochi-main

go 1.21

require github.com/mochi-mqtt/server/v2 v2.7.9
