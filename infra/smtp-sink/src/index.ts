export { startSmtpSink, type SmtpSink, type SmtpSinkOptions, type StoredMessage } from './sink.js';
