{#- Inline, no dependencies: (1) record the layout time; (2) the long tables (workloads, and
Karmada's bindings): the first rows are in the HTML, the rest come from the JSON beside each,
500 at a time as the reader scrolls to its end, or filtered by its search box; a row whose last
cell (the status) is not "ok" has that cell marked, and a bindings row excluding every cluster
is marked whole; (3) with a refresh interval, fetch the page again and swap <header> and
<main>, keeping each filter and how many rows were shown. Context: refresh (seconds or none),
eager_reason_cells, stranded (a binding's status when every cluster is excluded). -#}
(function(){var every={{ (refresh or 0)|tojson }},state={};
function table(id,marks){var data=document.getElementById(id+"-data"),body=document.querySelector("#"+id+" tbody");
if(!data||!body)return;var st=state[id]||(state[id]={q:"",shown:0}),all=JSON.parse(data.textContent),list=all,
shown=body.rows.length,box=document.getElementById(id+"-filter"),count=document.getElementById(id+"-count"),
more=document.getElementById(id+"-more");
function row(r){var tr=document.createElement("tr"),last=r[r.length-1];if(marks[last])tr.className=marks[last];
for(var i=0;i<r.length;i++){var td=document.createElement("td");td.textContent=r[i];
if(i==r.length-1&&r[i]!="ok")td.className="denied-tag";tr.appendChild(td)}return tr}
function add(n){var f=document.createDocumentFragment(),end=Math.min(list.length,shown+n);
for(;shown<end;shown++)f.appendChild(row(list[shown]));body.appendChild(f);st.shown=shown;
count.textContent="showing "+shown+" of "+list.length}
function filter(){var q=box.value.toLowerCase();st.q=box.value;list=q?all.filter(function(r){
return r.join(" ").toLowerCase().indexOf(q)>=0}):all;body.textContent="";shown=0;add(500)}
box.addEventListener("input",filter);if(st.q){box.value=st.q;filter()}
else if(st.shown>shown){add(st.shown-shown)}
if(more.getBoundingClientRect().top<innerHeight)add(500);
new IntersectionObserver(function(e){if(e[0].isIntersecting)add(500)}).observe(more)}
function reasons(){var m=document.getElementById("matrix"),d=document.getElementById("matrix-reasons"),
panel=document.getElementById("cell-reason");if(!m||!d)return;var R=JSON.parse(d.textContent),
heads=m.querySelectorAll("thead tr.names th.c");
function why(td){if(td.title)return td.title;var tr=td.parentNode,r=tr.getAttribute("data-row");
if(r===null||!td.classList.contains("c"))return"";var p=R.rows[+r],c=td.cellIndex-1,h=heads[c];
if(p<0||!h)return"";return h.getAttribute("data-cluster")+" ("+(h.getAttribute("data-group")||"no {{ matrix.group_by }}")+"): "+
R.texts[R.patterns[p][c]]}
var t0=m.tHead.getBoundingClientRect().top,hr=m.tHead.rows,tops=[];for(var k=0;k<hr.length;k++)
tops.push(Math.max(0,Math.floor(hr[k].getBoundingClientRect().top-t0)-1));for(k=0;k<hr.length;k++){var ths=hr[k].cells;
for(var j=0;j<ths.length;j++)if(ths[j].rowSpan<2)ths[j].style.top=tops[k]+"px"}
function show(e){var td=e.target.closest?e.target.closest("td"):null;if(!td||!m.contains(td))return;var t=why(td);
if(!t)return;td.title=t;var l=td.parentNode.getAttribute("data-label");panel.textContent=(l?l+" — ":"")+t}
m.addEventListener("mouseover",show);m.addEventListener("focusin",show);
if(+m.getAttribute("data-cells")<={{ eager_reason_cells }}){var cells=m.querySelectorAll("tbody td.c");
for(var i=0;i<cells.length;i++)if(!cells[i].title)cells[i].title=why(cells[i])}}
function tables(){table("workloads",{});table("bindings",{ {{- stranded|tojson -}} :"stranded"})}
addEventListener("load",function(){tables();void document.body.offsetHeight;
document.documentElement.setAttribute("data-rendered-ms",String(Math.round(performance.now())));reasons()});
if(!every)return;setInterval(function(){fetch(location.href,{cache:"no-store"}).then(function(r){
return r.ok?r.text():null}).then(function(t){if(!t)return;var d=new DOMParser().parseFromString(t,"text/html"),
m=d.querySelector("main"),h=d.querySelector("header");if(m){document.querySelector("main").replaceWith(m);tables();
reasons()}
if(h){document.querySelector("header").replaceWith(h)}}).catch(function(){})},every*1000)})();
