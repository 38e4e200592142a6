-- One database per service (a service never reads another's). Runs once, on an empty volume.
CREATE DATABASE orders;
CREATE DATABASE inventory;
CREATE DATABASE payments;
CREATE DATABASE notifications;
