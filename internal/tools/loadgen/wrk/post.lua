-- POST one single-recipient notification per request; a unique dedupeKey each
-- (an idempotent send, as a careful client makes it).
local counter = 0
local thread_id = 0
function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
end
function init(args)
  key = os.getenv("ONCEPUSH_KEY")
  dedupe = os.getenv("DEDUPE") ~= "0"
end
function request()
  counter = counter + 1
  local r = "lg-" .. (counter % 2000)
  local body
  if dedupe then
    body = string.format('{"recipients":["%s"],"title":"load","body":"n %d","dedupeKey":"wrk-%d-%d-%d"}', r, counter, tid, counter, os.time())
  else
    body = string.format('{"recipients":["%s"],"title":"load","body":"n %d"}', r, counter)
  end
  return wrk.format("POST", "/v1/notifications", {["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json"}, body)
end
function response(status, headers, body)
  if status ~= 202 then
    errors = (errors or 0) + 1
  end
end
