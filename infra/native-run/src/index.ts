export { runStories, placeOrder, waitForStatus, getJson, type StoryResult, type SystemUrls } from './stories.js';
export { startSystem, SERVICES, type RunningSystem, type ServiceName, type SystemOptions } from './system.js';
