// A kafkajs consumer group member for the life-cycle tests (run with node; kafkajs from NODE_PATH).
// node consumer.js BOOTSTRAP GROUP CLIENT_ID TOPIC: reads from the earliest offset when the group
// has none, commits after each batch, and prints one JSON line per event, as consumer.py does.
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, group, clientId, topic] = process.argv.slice(2);
const emit = (event, fields) => console.log(JSON.stringify({ event, ...fields }));

async function main() {
  const kafka = new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, heartbeat }) => {
      if (batch.messages.length === 0) return;
      for (const message of batch.messages) {
        emit("record", { partition: batch.partition, offset: Number(message.offset) });
      }
      const next = Number(batch.messages[batch.messages.length - 1].offset) + 1;
      try {
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(next) }]);
        emit("committed", { offsets: { [batch.partition]: next } });
      } catch (error) {
        emit("error", { error: String(error) });
      }
      await heartbeat();
    },
  });
}

main().catch((error) => {
  emit("error", { error: String(error) });
  process.exit(1);
});
