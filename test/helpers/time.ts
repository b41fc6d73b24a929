// How the service writes a time (lib/clock.ts toIso): ISO 8601 in UTC with milliseconds.
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
