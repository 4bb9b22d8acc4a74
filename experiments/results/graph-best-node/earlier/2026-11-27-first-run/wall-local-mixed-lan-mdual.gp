set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/graph-best-node/wall-local-mixed-lan-mdual.png'
set title 'Wall time to the tolerance, mdual on local-mixed-lan (median, min..max)'
set ylabel 'seconds'
set yrange [0:*]
set style fill solid 0.6
set boxwidth 0.6
set xtics rotate by -30
unset key
plot 'experiments/results/graph-best-node/wall-local-mixed-lan-mdual.dat' using 1:3:4:5:xtic(2) with boxerrorbars lc rgb '#4472c4'
