// The architecture's dependency rules, checked by `pnpm lint` (dependency-cruiser).
/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'contracts-is-a-leaf',
      comment: 'The message contracts depend on nothing of idem: every other part depends on them.',
      severity: 'error',
      from: { path: '^packages/contracts/src' },
      to: { path: '^(packages|services|infra|deploy)/', pathNot: '^packages/contracts/' },
    },
    {
      name: 'the-packages-carry-any-catalogue',
      comment:
        "The inbox, outbox, messaging, database and runtime packages carry whatever catalogue a user declares: they never import the shop's (their tests may use it).",
      severity: 'error',
      from: {
        path: '^packages/(inbox|outbox|transport|messaging|rabbitmq|database|runtime|contracts)/src/',
        pathNot: '\\.spec\\.ts$',
      },
      to: { path: '^packages/shop/' },
    },
    {
      name: 'inbox-knows-no-broker',
      comment: 'The inbox is the database half of the pattern: it never talks to BullMQ or Redis.',
      severity: 'error',
      from: { path: '^packages/inbox/src' },
      to: { path: ['(^|/node_modules/)(bullmq|ioredis)(/|$)', '^packages/messaging/'] },
    },
    {
      name: 'transport-knows-no-broker',
      comment:
        'The transport seam and the consumer runner hold for any broker: no BullMQ, Redis or RabbitMQ in them; an adapter (messaging, rabbitmq) depends on them, never the reverse.',
      severity: 'error',
      from: { path: '^packages/transport/src' },
      to: {
        path: ['(^|/node_modules/)(bullmq|ioredis|amqplib)(/|$)', '^packages/(messaging|rabbitmq)/'],
      },
    },
    {
      name: 'rabbitmq-needs-no-bullmq',
      comment: 'Each broker adapter stands on the transport seam alone: RabbitMQ needs no BullMQ or Redis.',
      severity: 'error',
      from: { path: '^packages/rabbitmq/src' },
      to: { path: ['(^|/node_modules/)(bullmq|ioredis)(/|$)', '^packages/messaging/'] },
    },
    {
      name: 'bullmq-needs-no-rabbitmq',
      comment: 'Each broker adapter stands on the transport seam alone: BullMQ needs no RabbitMQ.',
      severity: 'error',
      from: { path: '^packages/messaging/src' },
      to: { path: ['(^|/node_modules/)amqplib(/|$)', '^packages/rabbitmq/'] },
    },
    {
      name: 'packages-never-import-services',
      comment: 'Packages are what a service is built from; a service is never a library.',
      severity: 'error',
      from: { path: '^packages/' },
      to: { path: '^(services|infra|deploy)/' },
    },
    {
      name: 'deploy-stands-apart-from-the-native-run',
      comment:
        "The manifests are made from what the packages say (the shop's registry, the runtime's settings), never from the native run's choices.",
      severity: 'error',
      from: { path: '^deploy/' },
      to: { path: '^infra/native-run/' },
    },
    {
      name: 'services-never-import-each-other',
      comment: 'Services talk through messages and HTTP only.',
      severity: 'error',
      from: { path: '^services/([^/]+)/' },
      to: { path: '^services/', pathNot: '^services/$1/' },
    },
    {
      name: 'http-stays-at-the-edge',
      comment:
        "Express is the services' edge: their http/ folders and composition roots, and the http and runtime packages.",
      severity: 'error',
      from: {
        path: '^(services/[^/]+/src|packages/(contracts|inbox|outbox|messaging|faults|database|observability)/src)/',
        pathNot: ['^services/[^/]+/src/(http/|service\\.ts$)', '\\.spec\\.ts$'],
      },
      to: { path: '(^|/node_modules/)(express|@types/express)(/|$)' },
    },
    {
      name: 'domain-is-pure',
      comment:
        "A service's domain/ holds its decisions and state machines: it reads no database, no broker, no HTTP, and no other folder of the service.",
      severity: 'error',
      from: { path: '^services/([^/]+)/src/domain/', pathNot: '\\.spec\\.ts$' },
      to: { pathNot: ['^services/$1/src/domain/', '^packages/(contracts|shop)/', '(^|/node_modules/)zod(/|$)'] },
    },
    {
      name: 'application-is-beneath-its-adapters',
      comment:
        "A use case is called by the service's adapters (consumers, routes, workers), never the other way round.",
      severity: 'error',
      from: { path: '^services/([^/]+)/src/application/', pathNot: '\\.spec\\.ts$' },
      to: { path: '^services/$1/src/(consumers|http|workers)/' },
    },
    {
      name: 'providers-in-one-folder',
      comment:
        "A provider's client (Stripe's SDK, SMTP) is made and called in the service's providers/ folder only; the rest of the service asks it.",
      severity: 'error',
      from: { path: '^services/[^/]+/src/', pathNot: ['^services/[^/]+/src/providers/', '\\.spec\\.ts$'] },
      to: { path: '(^|/node_modules/)(@types/)?(stripe|nodemailer)(/|$)' },
    },
    {
      name: 'application-speaks-no-http',
      comment:
        "A service's application/ holds its use cases: it returns what happened, and its http/ folder says it in HTTP.",
      severity: 'error',
      from: { path: '^services/[^/]+/src/application/', pathNot: '\\.spec\\.ts$' },
      to: { path: '^packages/http/' },
    },
    {
      name: 'consumers-never-import-each-other',
      comment: 'A consumer is a thin adapter of one contract; what two share lives in application/ or domain/.',
      severity: 'error',
      from: { path: '^services/([^/]+)/src/consumers/([^/]+)\\.ts$', pathNot: '\\.spec\\.ts$' },
      to: { path: '^services/$1/src/consumers/', pathNot: '^services/$1/src/consumers/$2\\.ts$' },
    },
    {
      name: 'no-circular',
      comment:
        'A cycle makes two modules one: split or merge them. A type that names its user back (a class and the helper it hands itself to) is not one: nothing of it is left at run time.',
      severity: 'error',
      from: { path: '^(packages|services)/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['/generated/', '/dist/'] },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['development', 'import', 'types', 'default'],
      extensions: ['.ts', '.js', '.json'],
    },
  },
};
