// The SMTP sink: SMTP on SMTP_SINK_PORT (1025), Mailpit-compatible HTTP API on SMTP_SINK_HTTP_PORT (8025).
// Messages are kept in memory and lost on restart.
// ALLOWED_HOSTS: host:port,… its HTTP API answers to besides 127.0.0.1 and localhost on its port.
// HOST: the address it binds; beyond loopback its HTTP API answers only to ADMIN_TOKEN.
import { hostList } from '@idem/http';
import { startSmtpSink } from './sink.js';

const sink = await startSmtpSink({
  smtpPort: Number(process.env.SMTP_SINK_PORT ?? 1025),
  httpPort: Number(process.env.SMTP_SINK_HTTP_PORT ?? 8025),
  allowedHosts: hostList(process.env.ALLOWED_HOSTS),
  host: process.env.HOST ?? '127.0.0.1',
  ...(process.env.ADMIN_TOKEN ? { adminToken: process.env.ADMIN_TOKEN } : {}),
});
console.log(JSON.stringify({ service: 'smtp-sink', msg: `SMTP on :${sink.smtpPort}, HTTP API on :${sink.httpPort}` }));
const stop = () => void sink.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
