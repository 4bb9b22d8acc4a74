set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/graph-best-node/total-local-mixed-pagerank.png'
set title 'Total time (placing + run), pagerank on local-mixed (median, min..max)'
set ylabel 'seconds'
set yrange [0:*]
set datafile missing '-'
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.6 border -1
set xtics rotate by -20
plot 'experiments/results/graph-best-node/total-local-mixed-pagerank.dat' using 2:3:4:xtic(1) title 'best async auto profile', 'experiments/results/graph-best-node/total-local-mixed-pagerank.dat' using 5:6:7 title 'auto async auto profile', 'experiments/results/graph-best-node/total-local-mixed-pagerank.dat' using 8:9:10 title 'all async auto profile', 'experiments/results/graph-best-node/total-local-mixed-pagerank.dat' using 11:12:13 title 'all sync auto profile'
