-- TRAINING workload: fannkuch, string building/patterns, table sort, closures, coroutines
local N = tonumber(arg and arg[1]) or 1
math.randomseed(42)
local function fannkuch(n)
  local p, q, s, sign, maxflips, sum = {}, {}, {}, 1, 0, 0
  for i = 1, n do p[i] = i; q[i] = i; s[i] = i end
  repeat
    local q1 = p[1]
    if q1 ~= 1 then
      for i = 2, n do q[i] = p[i] end
      local flips = 1
      repeat
        local qq = q[q1]
        if qq == 1 then sum = sum + sign * flips; if flips > maxflips then maxflips = flips end; break end
        q[q1] = q1
        if q1 >= 4 then local i, j = 2, q1 - 1 repeat q[i], q[j] = q[j], q[i]; i = i + 1; j = j - 1 until i >= j end
        q1 = qq; flips = flips + 1
      until false
    end
    if sign == 1 then p[2], p[1] = p[1], p[2]; sign = -1
    else p[2], p[3] = p[3], p[2]; sign = 1
      for i = 3, n do
        local sx = s[i]
        if sx ~= 1 then s[i] = sx - 1; break end
        if i == n then return sum, maxflips end
        s[i] = i
        local t = p[1]; for j = 1, i do p[j] = p[j + 1] end; p[i + 1] = t
      end
    end
  until false
end
local function strings(n)
  local t = {}
  for i = 1, n do t[#t + 1] = string.format("%d:%s:%x", i, ("k" .. i):rep(3), i * 7) end
  local s = table.concat(t, ",")
  local c = 0
  for a, b in s:gmatch("(%d+):(%a+)") do c = c + #a + #b end
  s = s:gsub("k(%d)", "K%1"):upper():lower()
  return c + #s
end
local function sorting(n)
  local t = {}
  for i = 1, n do t[i] = math.random(1, 1000000) end
  table.sort(t)
  table.sort(t, function(a, b) return a > b end)
  local w = {}
  for i = 1, n do w[i] = tostring(t[i]) end
  table.sort(w)
  return #w
end
local function coro(n)
  local co = coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end)
  local s = 0
  for i = 1, n do s = s + co() end
  return s
end
local function compile(n)
  -- generated code: loops, arithmetic, locals, upvalues (parser/code generator)
  local c = 0
  for i = 1, n do
    local src = "local a, b = ...; local s = 0; for i = 1, " .. i .. " do if i % 3 == 0 then s = s + a * i elseif i % 3 == 1 then s = s - b else s = s + (a // (b + 1)) end end; while s > 1000 do s = s // 2 end; return s"
    local f = assert(load(src))
    c = c + f(i, i + 1)
  end
  return c
end
local acc = 0
for r = 1, N do
  acc = acc + compile(3000)
  acc = acc + fannkuch(9)
  acc = acc + strings(20000)
  acc = acc + sorting(30000)
  acc = acc + coro(50000)
end
print("train", acc)
